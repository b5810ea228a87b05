// A pty: create, sendInput, output through onData, resize, exit.
import { Sandbox, out, until } from './e2b.mjs'

const sbx = await Sandbox.connect(process.argv[2])
const dec = new TextDecoder()
let data = ''
const h = await sbx.pty.create({
  cols: 100,
  rows: 30,
  onData: (d) => { data += dec.decode(d, { stream: true }) },
})
const enc = new TextEncoder()
await sbx.pty.sendInput(h.pid, enc.encode('echo "[$((6*7))]"; stty size\n'))
const answered = await until(() => data.includes('[42]') && data.includes('30 100'))
await sbx.pty.resize(h.pid, { cols: 120, rows: 40 })
await sbx.pty.sendInput(h.pid, enc.encode('stty size\n'))
const resized = await until(() => data.includes('40 120'))
await sbx.pty.sendInput(h.pid, enc.encode('exit 3\n'))
let exit
try {
  exit = (await h.wait()).exitCode
} catch (e) {
  exit = e.exitCode
}
// A second pty, ended by kill.
const h2 = await sbx.pty.create({ cols: 80, rows: 24, onData: () => {} })
const killed = await sbx.pty.kill(h2.pid)
let exit2
try {
  exit2 = (await h2.wait()).exitCode
} catch (e) {
  exit2 = e.exitCode ?? e.message
}
out({ answered, resized, exit, killed, exit2, tty: data.includes('[42]') })
