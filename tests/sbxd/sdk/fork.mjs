// Sandbox.fork: count copies of a running sandbox's files (no process
// goes with them), each its own sandbox with the source's metadata; a
// write in one is in no other; a count out of 1..100 and a killed source
// are errors.
import { Sandbox, out } from './e2b.mjs'

const src = await Sandbox.create({ timeoutMs: 120_000, metadata: { team: 'a' } })
await src.commands.run('echo from-source > /home/user/f')
const forks = await Sandbox.fork(src.sandboxId, { count: 2, timeoutMs: 120_000 })
const ok = forks.filter((f) => !(f instanceof Error))
const files = []
for (const f of ok) files.push((await f.commands.run('cat /home/user/f')).stdout)
await ok[0].commands.run('echo fork0 > /home/user/f')
const inOther = (await ok[1].commands.run('cat /home/user/f')).stdout
const inSource = (await src.commands.run('cat /home/user/f')).stdout
const meta = (await ok[1].getInfo()).metadata
const ids = new Set([src.sandboxId, ...ok.map((f) => f.sandboxId)])

let tooMany
try {
  await Sandbox.fork(src.sandboxId, { count: 101 })
  tooMany = 'forked'
} catch (e) {
  tooMany = `${e.constructor.name} ${e.message.slice(0, 3)}`
}
// One with egress rules is not forked (its copies would not have them).
const fenced = await Sandbox.create({ timeoutMs: 120_000, network: { denyOut: ['0.0.0.0/0'] } })
let ruled
try {
  await Sandbox.fork(fenced.sandboxId, { count: 1 })
  ruled = 'forked'
} catch (e) {
  ruled = `${e.constructor.name} ${e.message.slice(0, 3)}`
}
await fenced.kill()
for (const f of ok) await f.kill()
await src.kill()
let gone
try {
  await Sandbox.fork(src.sandboxId, { count: 1 })
  gone = 'forked'
} catch (e) {
  gone = e.constructor.name
}
out({ n: forks.length, ok: ok.length, distinct: ids.size, files, inOther, inSource, meta, tooMany, gone, ruled })
