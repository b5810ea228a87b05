// The file system: upload(s), download(s), list, folder, move, delete,
// find, search, details, permissions.
import { Daytona, out, errInfo } from './daytona.mjs'

const daytona = new Daytona()
const sbx = await daytona.create({ labels: { test: 'files' } })
const fs = sbx.fs
const err = (p) => p.then(() => 'no error', (e) => errInfo(e))

await fs.uploadFile(Buffer.from('hello daytona\n'), 'up/one.txt')
await fs.uploadFiles([
  { source: Buffer.from('two\nneedle here\n'), destination: '/tmp/many/two.txt' },
  { source: Buffer.from('three\n'), destination: 'up/deep/three.txt' },
])
const one = (await fs.downloadFile('up/one.txt')).toString()
const many = await fs.downloadFiles([
  { source: '/tmp/many/two.txt' },
  { source: '/tmp/many/missing.txt' },
])
const listed = (await fs.listFiles('up')).map((f) => [f.name, f.isDir]).sort()
await fs.createFolder('made/inner', '750')
const folder = await fs.getFileDetails('made/inner')
const details = await fs.getFileDetails('up/one.txt')
await fs.moveFiles('up/one.txt', 'up/moved.txt')
const moveGone = await err(fs.getFileDetails('up/one.txt'))
const moveConflict = await err(fs.moveFiles('up/moved.txt', 'up/deep/three.txt'))
const moveMissing = await err(fs.moveFiles('up/nothing', 'up/else'))
const found = await fs.findFiles('/tmp/many', 'needle')
const searched = await fs.searchFiles('up', '*.txt')
await fs.setFilePermissions('up/moved.txt', { mode: '600' })
const perm = await fs.getFileDetails('up/moved.txt')
const rmDir = await err(fs.deleteFile('up/deep'))
await fs.deleteFile('up/deep', true)
await fs.deleteFile('up/moved.txt')
const after = (await fs.listFiles('up')).map((f) => f.name)
const ls = await sbx.process.executeCommand('stat -c %A /home/user/made/inner; cat /tmp/many/two.txt')
await sbx.delete()
out({
  one,
  many: many.map((m) => ({ source: m.source, ok: !m.error, text: m.result?.toString(), error: m.error ?? null })),
  listed,
  folder: { isDir: folder.isDir, permissions: folder.permissions },
  details: { name: details.name, size: details.size, isDir: details.isDir, owner: details.owner, mode: details.mode, permissions: details.permissions, modifiedAt: details.modifiedAt },
  moveGone: moveGone.status,
  moveConflict: moveConflict.status,
  moveMissing: moveMissing.status,
  found,
  searched: searched.files.sort(),
  perm: perm.permissions,
  rmDir: rmDir.status,
  rmDirMessage: rmDir.message,
  after,
  ls: ls.result,
})
