// Snapshots through E2B's SDK: createSnapshot of a running sandbox with
// a file written, listSnapshots (all, by sandbox, by name), a sandbox
// created from the snapshot (its id as the template) with that file, the
// source's later writes not in it; deleteSnapshot refused while a sandbox
// stands on it, then true, then false (gone).
import { Sandbox, out } from './e2b.mjs'

const ids = (a) => a.map((x) => x.snapshotId)
const all = async (opts) => {
  const p = Sandbox.listSnapshots(opts)
  const got = []
  while (p.hasNext) got.push(...(await p.nextItems()))
  return got
}

const src = await Sandbox.create({ timeoutMs: 120_000 })
await src.commands.run('echo in-snapshot > /home/user/f')
const snap = await src.createSnapshot({ name: 'sdk-snap' })
await src.commands.run('echo after > /home/user/f')
const other = await Sandbox.createSnapshot(src.sandboxId)

const listed = ids(await all())
const bySandbox = ids(await all({ sandboxId: src.sandboxId }))
const byName = ids(await all({ name: 'sdk-snap' }))
const paged = await Sandbox.listSnapshots({ limit: 1 }).nextItems()

const copy = await Sandbox.create(snap.snapshotId, { timeoutMs: 120_000 })
const file = (await copy.commands.run('cat /home/user/f')).stdout
const mine = (await copy.commands.run('echo copy > /home/user/f; cat /home/user/f')).stdout
const byNameCopy = await Sandbox.create('sdk-snap', { timeoutMs: 120_000 })
const file2 = (await byNameCopy.commands.run('cat /home/user/f')).stdout

let inUse
try {
  await Sandbox.deleteSnapshot(snap.snapshotId)
  inUse = 'deleted'
} catch (e) {
  inUse = `${e.constructor.name} ${e.message.slice(0, 3)}`
}
await copy.kill()
await byNameCopy.kill()
const deleted = await Sandbox.deleteSnapshot(snap.snapshotId)
const again = await Sandbox.deleteSnapshot(snap.snapshotId)
const deletedOther = await Sandbox.deleteSnapshot(other.snapshotId)
const left = ids(await all({ sandboxId: src.sandboxId }))
await src.kill()
out({
  snapshotId: snap.snapshotId,
  names: snap.names,
  otherNames: other.names,
  listedBoth: listed.includes(snap.snapshotId) && listed.includes(other.snapshotId),
  bySandbox: bySandbox.length === 2 && bySandbox.includes(snap.snapshotId),
  byName,
  paged: paged.length,
  file,
  mine,
  file2,
  inUse,
  deleted,
  again,
  deletedOther,
  left,
})
