// Volumes through E2B's SDK: Volume.create, list, getInfo; a sandbox with
// volumeMounts writes a file a second sandbox (made later, the same
// volume elsewhere) reads; getInfo says the mounts; destroy refused while
// mounted, then done, then not found.
import { Sandbox, Volume, out } from './e2b.mjs'

const vol = await Volume.create('sdk-vol')
let dup
try {
  await Volume.create('sdk-vol')
  dup = 'made'
} catch (e) {
  dup = `${e.constructor.name} ${e.message.slice(0, 3)}`
}
const listed = (await Volume.list()).map((v) => v.name)
const info = await Volume.getInfo(vol.volumeId)
const a = await Sandbox.create({ timeoutMs: 120_000, volumeMounts: { '/data': 'sdk-vol' } })
// A volume's root is root's (sbxd(8)), as the SDK's default user is not.
await a.commands.run('echo through-a > /data/f', { user: 'root' })
const mounts = (await a.getInfo()).volumeMounts
await a.kill()
const b = await Sandbox.create({ timeoutMs: 120_000, volumeMounts: { '/mnt/v': vol } })
const read = (await b.commands.run('cat /mnt/v/f')).stdout
let busy
try {
  await Volume.destroy(vol.volumeId)
  busy = 'destroyed'
} catch (e) {
  busy = `${e.constructor.name} ${e.message.slice(0, 3)}`
}
await b.kill()
const destroyed = await Volume.destroy(vol.volumeId)
let gone
try {
  await Volume.getInfo(vol.volumeId)
  gone = 'there'
} catch (e) {
  gone = e.constructor.name
}
out({ id: vol.volumeId, name: vol.name, dup, listed, info, mounts, read, busy, destroyed, gone })
