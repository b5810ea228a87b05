// A pause keeps a process started before it; a pause with
// { keepMemory: false } (E2B's filesystem-only pause, "memory": false)
// ends it and keeps the files: Sandbox.connect is a cold start.
import { Sandbox, out } from './e2b.mjs'

// How many `sleep 1000` run in the sandbox, from its /proc (the pattern
// does not match itself).
const SLEEPERS = 'cat /proc/[0-9]*/cmdline 2>/dev/null | tr "\\0" " " | grep -c "[s]leep 1000" || true'
const sleepers = async (s) => (await s.commands.run(SLEEPERS)).stdout.trim()

const sbx = await Sandbox.create({ timeoutMs: 120_000 })
await sbx.commands.run('echo before-pause > /home/user/kept')
await sbx.commands.run('sleep 1000', { background: true })
const before = await sleepers(sbx)

const warm = await sbx.pause()
const warmState = (await Sandbox.getInfo(sbx.sandboxId)).state
let s = await Sandbox.connect(sbx.sandboxId, { timeoutMs: 120_000 })
const afterWarm = await sleepers(s)

const cold = await s.pause({ keepMemory: false })
const coldState = (await Sandbox.getInfo(sbx.sandboxId)).state
const coldAgain = await Sandbox.pause(sbx.sandboxId, { keepMemory: false })
s = await Sandbox.connect(sbx.sandboxId, { timeoutMs: 120_000 })
const stateAfter = (await s.getInfo()).state
const afterCold = await sleepers(s)
const file = (await s.commands.run('cat /home/user/kept')).stdout
// the cold-started sandbox runs commands, as a new one does
const runs = (await s.commands.run('echo ok')).stdout
out({
  sandboxId: sbx.sandboxId,
  before,
  warm,
  warmState,
  afterWarm,
  cold,
  coldState,
  coldAgain,
  stateAfter,
  afterCold,
  file,
  runs,
})
await s.kill()
