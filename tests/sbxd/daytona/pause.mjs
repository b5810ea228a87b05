// pause: a sandbox of a linux-vm snapshot pauses with its processes (sbxd
// freezes them) and start goes on with them; a container's pause is
// refused (422), as Daytona's is.
import { Daytona, out, errInfo } from './daytona.mjs'

const [name, image] = process.argv.slice(2)
const daytona = new Daytona()
const snap = await daytona.snapshot.create(
  { name, image, sandboxClass: 'linux-vm' },
  { timeout: 120 },
)
const vm = await daytona.create({ snapshot: name }, { timeout: 60 })
// A process that counts, and a file written before the pause.
await vm.process.executeCommand(
  "sh -c 'i=0; while :; do i=$((i+1)); echo $i > /tmp/n; sleep 0.1; done' >/dev/null 2>&1 & echo $! > /tmp/pid",
)
await vm.process.executeCommand('echo kept > /tmp/kept')
await vm.pause()
const paused = vm.state
const listed = (await daytona.get(vm.id)).state
const n1 = (await vm.process.executeCommand('cat /tmp/n').catch((e) => ({ result: errInfo(e).message }))).result
await vm.start()
const started = vm.state
const alive = await vm.process.executeCommand('kill -0 $(cat /tmp/pid) && echo alive && cat /tmp/kept')
await vm.pause()
await vm.stop()
const stopped = vm.state
await vm.start()
const after = await vm.process.executeCommand('kill -0 $(cat /tmp/pid) 2>/dev/null && echo alive || echo gone')
await vm.delete()
const box = await daytona.create({}, { timeout: 60 })
const refused = await box.pause().then(() => 'paused', (e) => errInfo(e))
const boxState = (await daytona.get(box.id)).state
await box.delete()
await daytona.snapshot.delete(snap)
out({
  snapClass: snap.sandboxClass,
  vmClass: vm.sandboxClass,
  paused,
  listed,
  whilePaused: n1,
  started,
  alive: alive.result.trim(),
  stopped,
  after: after.result.trim(),
  boxClass: box.sandboxClass,
  refused,
  boxState,
})
