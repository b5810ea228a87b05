// E2B's volume content API through the SDK's Volume methods (writeFile,
// readFile, makeDir, list, getInfo, exists, updateMetadata, remove), with
// E2B_VOLUME_API_URL at sbxd; a sandbox that mounts the volume sees what
// the SDK wrote, and the SDK what the sandbox wrote (a symlink too).
import { Sandbox, Volume, out } from './e2b.mjs'

async function err(p) {
  try {
    await p
    return 'ok'
  } catch (e) {
    return e.constructor.name
  }
}

const stat = (e) => ({ name: e.name, path: e.path, type: e.type, size: e.size,
  mode: e.mode, uid: e.uid, gid: e.gid, target: e.target,
  mtimeOk: e.mtime instanceof Date && !isNaN(e.mtime) })

const vol = await Volume.create('sdk-vc')
const conn = await Volume.connect('sdk-vc')
const tokenSame = conn.token === vol.token && /^[0-9a-f]{64}$/.test(vol.token)

const wrote = stat(await vol.writeFile('/hello.txt', 'hello volume\n'))
const bytes = new Uint8Array([0, 1, 2, 255, 254])
await vol.writeFile('/bin.dat', bytes, { mode: 0o600, uid: 1000, gid: 1000 })
const text = await vol.readFile('/hello.txt')
const back = Array.from(await vol.readFile('/bin.dat', { format: 'bytes' }))
const again = await err(vol.writeFile('/hello.txt', 'x'))
await vol.writeFile('/hello.txt', 'replaced\n', { force: true })
const replaced = await conn.readFile('/hello.txt')

const noParent = await err(vol.makeDir('/a/b/c'))
const made = stat(await vol.makeDir('/a/b/c', { force: true }))
const dir = stat(await vol.makeDir('/top', { uid: 1000, gid: 1000, mode: 0o750 }))
const dirAgain = await err(vol.makeDir('/top'))
await vol.writeFile('/a/b/in.txt', 'deep')
const depth1 = (await vol.list('/')).map((e) => e.path)
const depth2 = (await vol.list('/', { depth: 2 })).map((e) => e.path)
const missingList = await err(vol.list('/nope'))

const sbx = await Sandbox.create({ timeoutMs: 120_000, volumeMounts: { '/data': vol } })
const seen = (await sbx.commands.run('cat /data/hello.txt; stat -c "%u:%g %a" /data/bin.dat /data/top',
  { user: 'root' })).stdout
await sbx.commands.run('echo from-sandbox > /data/sbx.txt; ln -s /etc/passwd /data/evil',
  { user: 'root' })
const fromSbx = await vol.readFile('/sbx.txt')
const fileInfo = stat(await vol.getInfo('/hello.txt'))
const dirInfo = stat(await vol.getInfo('/a'))
const linkInfo = stat(await vol.getInfo('/evil'))
// evil -> /etc/passwd is read inside the volume: no /etc/passwd there.
const evilRead = await err(vol.readFile('/evil'))
const exists = [await vol.exists('/hello.txt'), await vol.exists('/nope')]
const meta = stat(await vol.updateMetadata('/hello.txt', { uid: 1000, gid: 1000, mode: 0o640 }))
const metaSeen = (await sbx.commands.run('stat -c "%u:%g %a" /data/hello.txt')).stdout
await vol.remove('/a')
await vol.remove('/evil')
const removed = [await vol.exists('/a'), await vol.exists('/evil'),
  (await sbx.commands.run('ls /data')).stdout]
const removeMissing = await err(vol.remove('/a'))
const passwd = (await sbx.commands.run('head -c 5 /etc/passwd')).stdout
await sbx.kill()
await Volume.destroy(vol.volumeId)
out({ tokenSame, wrote, text, back, again, replaced, noParent, made, dir, dirAgain,
  depth1, depth2, missingList, seen, fromSbx, fileInfo, dirInfo, linkInfo, evilRead,
  exists, meta, metaSeen, removed, removeMissing, passwd })
