// Who commands and files belong to, as on E2B: the default user "user"
// (uid 1000, home /home/user), root when asked, an unknown name refused.
import { Sandbox, out, until } from './e2b.mjs'

const sbx = await Sandbox.connect(process.argv[2])
const run = async (cmd, opts) => (await sbx.commands.run(cmd, opts)).stdout
const def = await run('id -u; id -g; id -un; echo "$HOME"; pwd')
const root = await run('id -u; id -g; echo "$HOME"; pwd', { user: 'root' })
await sbx.files.write('/home/user/by-user.txt', 'u')
await sbx.files.write('/tmp/by-root.txt', 'r', { user: 'root' })
const owners = await run('stat -c "%u:%g %n" /home/user /home/user/by-user.txt /tmp/by-root.txt')
const made = await run('touch made-by-user; stat -c "%u:%g" made-by-user')
const info = await sbx.files.getInfo('/home/user/by-user.txt')
const h = await sbx.commands.run('id -u', { background: true, user: 'root' })
const bg = (await h.wait()).stdout
// A pty: the default user's, and root's when asked.
const pty = async (opts) => {
  let data = ''
  const dec = new TextDecoder()
  const p = await sbx.pty.create({ cols: 80, rows: 24, ...opts, onData: (d) => { data += dec.decode(d, { stream: true }) } })
  await sbx.pty.sendInput(p.pid, new TextEncoder().encode('echo "[u=$(id -u)]"; exit\n'))
  await until(() => /\[u=\d+\]/.test(data))
  try { await p.wait() } catch (e) {}
  return (data.match(/\[u=(\d+)\]/) || [])[1]
}
const ptyUser = await pty({})
const ptyRoot = await pty({ user: 'root' })
let unknown = null
try {
  await sbx.commands.run('id -u', { user: 'nosuch' })
} catch (e) {
  unknown = `${e.name}: ${e.message}`
}
out({ def, root, owners, made, owner: info.owner, group: info.group, bg, ptyUser, ptyRoot, unknown })
