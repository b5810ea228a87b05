// Sandbox.create without internet access, then updateNetwork gives it a
// network with a header rule (sbxd makes its CA then), and takes it away
// again.
import { Sandbox, out } from './e2b.mjs'

const key = process.env.SBX_TEST_KEY
const sbx = await Sandbox.create({ timeoutMs: 120_000, allowInternetAccess: false })
const curl = async (u) => {
  try {
    const r = await sbx.commands.run(`curl -sS --max-time 5 ${u}`)
    return JSON.parse(r.stdout)
  } catch (e) {
    return { failed: e.exitCode ?? e.name }
  }
}
const before = await curl('http://a.test/h')
await sbx.updateNetwork({
  allowOut: ['a.test'],
  denyOut: ['0.0.0.0/0'],
  rules: { 'a.test': [{ transform: { headers: { 'x-api-key': key } } }] },
})
const a = await curl('https://a.test/h')
const c = await curl('http://c.test/h')
await sbx.updateNetwork({ allowInternetAccess: false })
const after = await curl('http://a.test/h')
out({
  before: before.failed !== undefined,
  a: a.server,
  key: a.headers?.['x-api-key'] === key,
  c: c.failed !== undefined,
  after: after.failed !== undefined,
})
await sbx.kill()
