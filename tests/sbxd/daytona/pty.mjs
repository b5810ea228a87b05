// PTYs: createPty (envs, cwd, size), input, resize, getPtySessionInfo,
// listPtySessions, the exit code, killPtySession; connectPty to one
// made by POST /process/pty.
import { Daytona, out, errInfo } from './daytona.mjs'

const daytona = new Daytona()
const sbx = await daytona.create({ labels: { test: 'pty' } })
const p = sbx.process
const err = (x) => x.then(() => 'no error', (e) => errInfo(e))
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
let text = ''
const waitFor = async (re) => {
  for (let i = 0; i < 100 && !re.test(text); i++) await sleep(100)
  return re.test(text)
}

const h = await p.createPty({
  id: 'p1', cwd: '/tmp', cols: 90, rows: 20, envs: { PTY_GREETING: 'hello pty' },
  onData: (d) => { text += new TextDecoder().decode(d) },
})
await h.sendInput('echo "[$PTY_GREETING] [$PWD] [$(tty >/dev/null && echo tty)] [$((6*7))]"; stty size\n')
const first = await waitFor(/20 90/)
const greeting = /\[hello pty\] \[\/tmp\] \[tty\] \[42\]/.test(text)
const info = await p.getPtySessionInfo('p1')
await h.resize(120, 40)
await h.sendInput('stty size\n')
const resized = await waitFor(/40 120/)
const list = await p.listPtySessions()
await h.sendInput('exit 3\n')
const res = await h.wait()
const after = await p.getPtySessionInfo('p1')

await p.killPtySession('p1')
// One made by POST /process/pty (the API client's), then connectPty.
await p.apiClient.createPtySession({ id: 'p2', cols: 80, rows: 24 })
text = ''
const h2 = await p.connectPty('p2', { onData: (d) => { text += new TextDecoder().decode(d) } })
await h2.sendInput('echo "con""nected"; exit\n')
const res2 = await h2.wait()
const connected = /connected/.test(text)
const gone = await err(p.getPtySessionInfo('p1'))
await sbx.delete()
out({
  first,
  greeting,
  info: { id: info.id, cols: info.cols, rows: info.rows, active: info.active, cwd: info.cwd },
  resized,
  list: list.map((s) => s.id),
  exitCode: res.exitCode,
  afterActive: after.active,
  gone: gone.status,
  connected,
  exitCode2: res2.exitCode,
})
