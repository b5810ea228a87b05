// Sandbox.connect with onResume: 'reboot' ("memory": false at connect): a
// paused sandbox resumes from its files alone, its processes gone; the
// default ('restore') keeps them.
import { Sandbox, out } from './e2b.mjs'

const SLEEPERS = 'cat /proc/[0-9]*/cmdline 2>/dev/null | tr "\\0" " " | grep -c "[s]leep 1000" || true'
const sleepers = async (s) => (await s.commands.run(SLEEPERS)).stdout.trim()

const sbx = await Sandbox.create({ timeoutMs: 120_000 })
await sbx.commands.run('echo kept > /home/user/kept')
await sbx.commands.run('sleep 1000', { background: true })
const before = await sleepers(sbx)
await sbx.pause()
let s = await Sandbox.connect(sbx.sandboxId, { timeoutMs: 120_000 })
const restored = await sleepers(s)
await s.pause()
s = await Sandbox.connect(sbx.sandboxId, { timeoutMs: 120_000, onResume: 'reboot' })
const state = (await s.getInfo()).state
const rebooted = await sleepers(s)
const file = (await s.commands.run('cat /home/user/kept')).stdout
// A running one is only connected to: its processes stay.
await s.commands.run('sleep 1000', { background: true })
s = await Sandbox.connect(sbx.sandboxId, { timeoutMs: 120_000, onResume: 'reboot' })
const running = await sleepers(s)
out({ before, restored, state, rebooted, file, running })
await s.kill()
