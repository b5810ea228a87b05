// Sandbox.list with startedAfter and template (GET /v2/sandboxes'
// query): only the sandboxes started at or after the time, of the
// template named.
import { Sandbox, out } from './e2b.mjs'

const run = `r${process.pid}`
const a = await Sandbox.create({ metadata: { run }, timeoutMs: 120_000 })
await new Promise((r) => setTimeout(r, 20))
const between = new Date()
await new Promise((r) => setTimeout(r, 20))
const b = await Sandbox.create({ metadata: { run }, timeoutMs: 120_000 })
const ids = async (query) => {
  const p = Sandbox.list({ query: { metadata: { run }, ...query } })
  const all = []
  while (p.hasNext) all.push(...(await p.nextItems()))
  return all.map((s) => s.sandboxId).sort()
}
out({
  a: a.sandboxId,
  b: b.sandboxId,
  all: await ids({}),
  after: await ids({ startedAfter: between }),
  afterAll: await ids({ startedAfter: new Date(Date.now() + 3_600_000) }),
  beforeAll: await ids({ startedAfter: new Date(Date.now() - 3_600_000) }),
  base: await ids({ template: 'base' }),
  other: await ids({ template: 'no-such-template' }),
})
await a.kill()
await b.kill()
