// kill: then Sandbox.list no longer shows it, getInfo raises NotFoundError,
// and killing it again answers false.
import { Sandbox, NotFoundError, SandboxNotFoundError, out } from './e2b.mjs'

const run = `k${process.pid}`
const sbx = await Sandbox.create({ metadata: { run }, timeoutMs: 120_000 })
const listed = async () => {
  const p = Sandbox.list({ query: { metadata: { run } } })
  return (await p.nextItems()).map((s) => s.sandboxId)
}
const before = await listed()
const killed = await sbx.kill()
const after = await listed()
let err
try {
  await Sandbox.getInfo(sbx.sandboxId)
  err = null
} catch (e) {
  err = { notFound: e instanceof NotFoundError, sandboxNotFound: e instanceof SandboxNotFoundError, message: e.message }
}
out({
  sandboxId: sbx.sandboxId,
  before,
  killed,
  after,
  err,
  running: await sbx.isRunning(),
  killAgain: await Sandbox.kill(sbx.sandboxId),
})
