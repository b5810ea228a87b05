// A sandbox killed while a command runs (in the foreground, in the
// background through wait(), and at its end of life): what the SDK
// reports, as against E2B.
import { Sandbox, out, errInfo } from './e2b.mjs'

const fg = await Sandbox.create({ timeoutMs: 120_000 })
const running = fg.commands.run('echo started; sleep 60').then(
  () => ({ threw: false }),
  (e) => errInfo(e),
)
await new Promise((r) => setTimeout(r, 1000))
await Sandbox.kill(fg.sandboxId)
const res = { fg: await running }
const bg = await Sandbox.create({ timeoutMs: 120_000 })
const h = await bg.commands.run('sleep 60', { background: true })
await new Promise((r) => setTimeout(r, 500))
await bg.kill()
res.bg = await h.wait().then(() => ({ threw: false }), (e) => errInfo(e))
// one whose time runs out under its command
const short = await Sandbox.create({ timeoutMs: 3_000 })
res.timedOut = await short.commands.run('sleep 60', { timeoutMs: 0 }).then(
  () => ({ threw: false }),
  (e) => errInfo(e),
)
out(res)
