// The secrets API: Secret.create, getInfo (by name and by id), update,
// list (page by page), exists, destroy. The value is argv[2].
import { Secret, SecretNotFoundError, out, errInfo } from './e2b.mjs'

const value = process.argv[2]
const info = (s) => ({ ...s, createdAt: s.createdAt.toISOString(), updatedAt: s.updatedAt.toISOString() })
const created = await Secret.create('Sdk_Key', value, { metadata: { team: 'a' } })
const byName = await Secret.getInfo('sdk_key')
const byId = await Secret.getInfo(created.secretId)
const updated = await Secret.update('sdk_key', value + '2')
await Secret.create('sdk-other', value)
const pages = []
const p = Secret.list({ limit: 1 })
while (p.hasNext) pages.push((await p.nextItems()).map((s) => s.name))
const dup = await Secret.create('sdk_key', value).then(() => 'no error', (e) => errInfo(e).name)
const existsBefore = await Secret.exists('sdk_key')
const destroyed = await Secret.destroy('sdk_key')
const destroyedAgain = await Secret.destroy('sdk_key')
const existsAfter = await Secret.exists('sdk_key')
const missing = await Secret.getInfo('sdk_key').then(() => 'no error',
  (e) => (e instanceof SecretNotFoundError ? 'SecretNotFoundError' : errInfo(e).name))
await Secret.destroy('sdk-other')
out({
  created: info(created),
  byName: byName.name,
  byId: byId.name,
  updated: { version: updated.version, metadata: updated.metadata },
  pages,
  dup,
  existsBefore,
  destroyed,
  destroyedAgain,
  existsAfter,
  missing,
})
