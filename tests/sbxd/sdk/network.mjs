// Sandbox.create with E2B's network options (rules with a header
// transform, allowOut, denyOut), then what the sandbox reaches, getHost of
// a port it serves, and updateNetwork. Argument: the sbxd URL the port's
// host is fetched through.
import http from 'node:http'
import { Sandbox, out } from './e2b.mjs'

const [url] = process.argv.slice(2)
const key = process.env.SBX_TEST_KEY
const sbx = await Sandbox.create({
  timeoutMs: 120_000,
  network: {
    allowOut: ['a.test'],
    denyOut: ['0.0.0.0/0'],
    rules: { 'a.test': [{ transform: { headers: { 'x-api-key': key } } }] },
  },
})
const curl = async (u) => {
  try {
    const r = await sbx.commands.run(`curl -sS --max-time 5 -H 'x-api-key: mine' ${u}`)
    return JSON.parse(r.stdout)
  } catch (e) {
    return { failed: e.exitCode ?? e.name }
  }
}
const a = await curl('http://a.test/h')
const c = await curl('http://c.test/h')
const info = await sbx.getInfo()
// A server on the sandbox's port 8000, reached at getHost(8000).
await sbx.commands.run(
  'mkdir -p /tmp/w && echo hi from 8000 >/tmp/w/hello && cd /tmp/w && python3 -m http.server 8000 --bind 127.0.0.1',
  { background: true },
)
const host = sbx.getHost(8000)
// As a resolver would send the host to sbxd (fetch will not set Host).
const get = () =>
  new Promise((res) => {
    const u = new URL(url)
    const q = http.get(
      { host: u.hostname, port: u.port, path: '/hello', headers: { host } },
      (r) => {
        let b = ''
        r.on('data', (d) => (b += d))
        r.on('end', () => res(r.statusCode === 200 ? b.trim() : null))
      },
    )
    q.on('error', () => res(null))
  })
let page = null
for (let i = 0; i < 100 && page === null; i++) {
  page = await get()
  if (page === null) await new Promise((res) => setTimeout(res, 50))
}
await sbx.updateNetwork({ allowOut: ['c.test'], denyOut: ['0.0.0.0/0'] })
const c2 = await curl('http://c.test/h')
const a2 = await curl('http://a.test/h')
out({
  a: { server: a.server, key: a.headers?.['x-api-key'] === key },
  c: c.failed !== undefined,
  allowOut: info.network?.allowOut,
  denyOut: info.network?.denyOut,
  host: host.replace(sbx.sandboxId, 'ID'),
  page,
  c2: c2.server,
  a2: a2.failed !== undefined,
})
await sbx.kill()
