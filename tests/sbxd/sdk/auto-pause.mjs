// At its end (timeoutMs), a sandbox made with onTimeout 'pause' is paused
// with its processes; with { action: 'pause', keepMemory: false } (E2B's
// autoPauseMemory: false) its processes end and its files stay:
// Sandbox.connect is then a cold start.
import { Sandbox, out } from './e2b.mjs'

const SLEEPERS = 'cat /proc/[0-9]*/cmdline 2>/dev/null | tr "\\0" " " | grep -c "[s]leep 1000" || true'
const sleepers = async (s) => (await s.commands.run(SLEEPERS)).stdout.trim()

const make = async (onTimeout) => {
  const s = await Sandbox.create({ timeoutMs: 3_000, lifecycle: { onTimeout } })
  await s.commands.run('echo kept > /home/user/kept')
  await s.commands.run('sleep 1000', { background: true })
  return s
}
// Its state once its end has come (paused), or the last one seen.
const ended = async (id) => {
  let st
  for (let i = 0; i < 300; i++) {
    st = (await Sandbox.getInfo(id)).state
    if (st === 'paused') break
    await new Promise((r) => setTimeout(r, 200))
  }
  return st
}

const warm = await make('pause')
const cold = await make({ action: 'pause', keepMemory: false })
const before = [await sleepers(warm), await sleepers(cold)]
const states = [await ended(warm.sandboxId), await ended(cold.sandboxId)]
const w = await Sandbox.connect(warm.sandboxId, { timeoutMs: 120_000 })
const c = await Sandbox.connect(cold.sandboxId, { timeoutMs: 120_000 })
out({
  before,
  states,
  after: [await sleepers(w), await sleepers(c)],
  files: [(await w.commands.run('cat /home/user/kept')).stdout,
    (await c.commands.run('cat /home/user/kept')).stdout],
})
await w.kill()
await c.kill()
