// Sandbox.list with a metadata filter: only the sandbox that matches.
// Keys and values with a space, & and % test how the filter is escaped.
import { Sandbox, out } from './e2b.mjs'

const run = `r${process.pid}`
const a = await Sandbox.create({ metadata: { run, 'owner name': 'a b&c=%d' }, timeoutMs: 120_000 })
const b = await Sandbox.create({ metadata: { run, 'owner name': 'other' }, timeoutMs: 120_000 })
const ids = async (query) => {
  const p = Sandbox.list({ query })
  const all = []
  while (p.hasNext) all.push(...(await p.nextItems()))
  return all.map((s) => s.sandboxId)
}
const res = {
  a: a.sandboxId,
  b: b.sandboxId,
  matchA: await ids({ metadata: { run, 'owner name': 'a b&c=%d' } }),
  matchB: await ids({ metadata: { 'owner name': 'other', run } }),
  both: (await ids({ metadata: { run } })).sort(),
  none: await ids({ metadata: { run, 'owner name': 'a b' } }),
}
await b.pause()
res.runningOnly = await ids({ metadata: { run }, state: ['running'] })
res.pausedOnly = await ids({ metadata: { run }, state: ['paused'] })
const p = Sandbox.list({ query: { metadata: { run } } })
res.listed = (await p.nextItems()).find((s) => s.sandboxId === a.sandboxId)?.metadata
out(res)
await a.kill()
await b.kill()
