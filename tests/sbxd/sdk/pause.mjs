// Pause, then Sandbox.connect resumes it: a file written before and a
// background process started before are still there.
import { Sandbox, out } from './e2b.mjs'

const sbx = await Sandbox.create({ timeoutMs: 120_000 })
await sbx.commands.run('echo before-pause > /home/user/kept')
const bg = await sbx.commands.run('sleep 1000', { background: true })
const paused = await sbx.pause()
const state = (await Sandbox.getInfo(sbx.sandboxId)).state
const pausedAgain = await Sandbox.pause(sbx.sandboxId)
const back = await Sandbox.connect(sbx.sandboxId, { timeoutMs: 120_000 })
const stateAfter = (await back.getInfo()).state
const file = (await back.commands.run('cat /home/user/kept')).stdout
const procs = await back.commands.list()
// connect to a running sandbox is an attach: the same sandbox
const again = await Sandbox.connect(sbx.sandboxId)
out({
  sandboxId: sbx.sandboxId,
  paused,
  state,
  pausedAgain,
  sameId: back.sandboxId === sbx.sandboxId,
  stateAfter,
  file,
  sleeping: procs.some((p) => p.pid === bg.pid && p.args.join(' ').includes('sleep 1000')),
  againRuns: (await again.commands.run('echo ok')).stdout,
})
await back.kill()
