// getPreviewLink of a port a server in the sandbox listens on.
import { Daytona, out } from './daytona.mjs'

const [port] = process.argv.slice(2)
const daytona = new Daytona()
const sbx = await daytona.create({}, { timeout: 60 })
await sbx.process.executeCommand(`mkdir -p /tmp/www && echo preview-ok > /tmp/www/index.html`)
await sbx.process.createSession('web')
await sbx.process.executeSessionCommand('web', {
  command: `cd /tmp/www && exec python3 -m http.server ${port} --bind 127.0.0.1`,
  runAsync: true,
})
// Until the server answers inside the sandbox.
for (let i = 0; i < 50; i++) {
  const r = await sbx.process.executeCommand(
    `python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:${port}/')"`,
  )
  if (r.exitCode === 0) break
  await new Promise((res) => setTimeout(res, 200))
}
const link = await sbx.getPreviewLink(Number(port))
out({ id: sbx.id, url: link.url, token: link.token, sandboxId: link.sandboxId })
