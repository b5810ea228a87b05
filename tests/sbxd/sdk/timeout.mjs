// setTimeout: moves the end (longer, then shorter); at the end the
// sandbox is gone.
import { Sandbox, NotFoundError, out, until } from './e2b.mjs'

const sbx = await Sandbox.create({ timeoutMs: 60_000 })
const left = async () => Math.round(((await sbx.getInfo()).endAt - Date.now()) / 1000)
const before = await left()
await sbx.setTimeout(600_000)
const longer = await left()
await Sandbox.setTimeout(sbx.sandboxId, 2_000)
const shorter = await left()
const gone = await until(async () => !(await sbx.isRunning()), 15_000)
let notFound
try {
  await sbx.getInfo()
  notFound = false
} catch (e) {
  notFound = e instanceof NotFoundError
}
out({ sandboxId: sbx.sandboxId, before, longer, shorter, gone, notFound })
