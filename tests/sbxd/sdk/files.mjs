// The filesystem: write, read, list, exists, makeDir, rename, remove
// (the envd filesystem service and /files). write() sends one file, or
// several in one request, as multipart/form-data (each part's filename the
// destination), unless told useOctetStream or gzip.
import { Sandbox, FileNotFoundError, NotFoundError, out } from './e2b.mjs'

const sbx = await Sandbox.connect(process.argv[2])
const d = '/home/user/sdk'
const res = {}
res.madeDir = await sbx.files.makeDir(d)
res.madeDirAgain = await sbx.files.makeDir(d)
const w = await sbx.files.write(`${d}/a.txt`, 'hello from the sdk\n')
res.written = { name: w.name, path: w.path, type: w.type }
await sbx.files.write([
  { path: `${d}/b.bin`, data: new Uint8Array([0, 1, 2, 255]).buffer },
  { path: `${d}/sub/c.txt`, data: 'deep' },
])
// application/octet-stream, the other upload form
await sbx.files.write(`${d}/sub/o.txt`, 'octet', { useOctetStream: true })
res.octet = await sbx.files.read(`${d}/sub/o.txt`)
// gzip both ways (Content-Encoding up, Accept-Encoding down)
await sbx.files.write(`${d}/sub/g.txt`, 'zipped', { gzip: true })
res.gzip = await sbx.files.read(`${d}/sub/g.txt`, { gzip: true })
res.read = await sbx.files.read(`${d}/a.txt`)
res.readBytes = Array.from(await sbx.files.read(`${d}/b.bin`, { format: 'bytes' }))
res.seenByShell = (await sbx.commands.run(`cat ${d}/sub/c.txt`)).stdout
res.list = (await sbx.files.list(d)).map((e) => `${e.name}:${e.type}`).sort()
res.exists = await sbx.files.exists(`${d}/a.txt`)
res.existsNot = await sbx.files.exists(`${d}/nope`)
const moved = await sbx.files.rename(`${d}/a.txt`, `${d}/renamed.txt`)
res.renamed = { name: moved.name, path: moved.path }
res.afterRename = { old: await sbx.files.exists(`${d}/a.txt`), new: await sbx.files.read(`${d}/renamed.txt`) }
await sbx.files.remove(`${d}/renamed.txt`)
res.afterRemove = await sbx.files.exists(`${d}/renamed.txt`)
try {
  await sbx.files.read(`${d}/renamed.txt`)
  res.readMissing = 'no error'
} catch (e) {
  res.readMissing = e instanceof FileNotFoundError ? 'FileNotFoundError' : e instanceof NotFoundError ? 'NotFoundError' : `${e.constructor.name}: ${e.message}`
}
await sbx.files.remove(d)
res.dirGone = !(await sbx.files.exists(d))
out(res)
