// wsraw.mjs - a WebSocket client of raw frames, for what the SDK never
// does: node wsraw.mjs URL [bad|proto|plain]. Connects (Authorization from
// DAYTONA_API_KEY, X-Daytona-SDK-Version 0.218.0 as a header, or with
// "proto" as the protocol X-Daytona-SDK-Version~0.218.0, or with "plain"
// not at all), sends a ping, and with "bad" then an unmasked frame (which
// a server must refuse with 1002); prints {status, accept, protocol,
// frames: [{op, data, code}]} once the server closes.
import net from 'node:net'
import crypto from 'node:crypto'

const [url, bad] = process.argv.slice(2)
const u = new URL(url)
const key = crypto.randomBytes(16).toString('base64')
const want = crypto.createHash('sha1').update(key + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11').digest('base64')
const sock = net.connect(Number(u.port), u.hostname)
sock.on('error', () => {})
let buf = Buffer.alloc(0)
let head = null
const frames = []

const masked = (op, payload) => {
  const mask = crypto.randomBytes(4)
  const p = Buffer.from(payload)
  const m = Buffer.from(p.map((b, i) => b ^ mask[i & 3]))
  return Buffer.concat([Buffer.from([0x80 | op, 0x80 | p.length]), mask, m])
}

sock.on('connect', () => {
  sock.write(`GET ${u.pathname}${u.search} HTTP/1.1\r\nHost: ${u.host}\r\n` +
    `Authorization: Bearer ${process.env.DAYTONA_API_KEY}\r\n` +
    (bad === 'proto' ? 'Sec-WebSocket-Protocol: X-Daytona-SDK-Version~0.218.0\r\n'
      : bad === 'plain' ? '' : 'X-Daytona-SDK-Version: 0.218.0\r\n') +
    'Upgrade: websocket\r\n' +
    `Connection: Upgrade\r\nSec-WebSocket-Key: ${key}\r\n` +
    'Sec-WebSocket-Version: 13\r\n\r\n')
})
sock.on('data', (d) => {
  buf = Buffer.concat([buf, d])
  if (!head) {
    const end = buf.indexOf('\r\n\r\n')
    if (end < 0) return
    head = buf.subarray(0, end).toString()
    buf = buf.subarray(end + 4)
    // Refused: its body is not ours to read, nor is the kept-alive
    // connection.
    if (Number(head.split(' ')[1]) !== 101) { sock.destroy(); return }
    sock.write(masked(9, 'hi'))
    if (bad === 'bad') sock.write(Buffer.from([0x81, 0x01, 0x78]))
  }
  for (;;) {
    if (buf.length < 2) return
    let len = buf[1] & 127
    let h = 2
    if (len === 126) { if (buf.length < 4) return; len = buf.readUInt16BE(2); h = 4 }
    if (len === 127) { if (buf.length < 10) return; len = Number(buf.readBigUInt64BE(2)); h = 10 }
    if (buf.length < h + len) return
    const op = buf[0] & 15
    const p = buf.subarray(h, h + len)
    buf = buf.subarray(h + len)
    frames.push(op === 8 ? { op, code: p.length >= 2 ? p.readUInt16BE(0) : null } : { op, data: p.toString('latin1') })
    if (op === 8) sock.end(masked(8, p.subarray(0, 2)))
  }
})
sock.on('close', () => {
  const status = head ? Number(head.split(' ')[1]) : null
  const accept = /\r\nsec-websocket-accept: (\S+)/i.exec(head ?? '')?.[1] === want
  const protocol = /\r\nsec-websocket-protocol: (\S+)/i.exec(head ?? '')?.[1] ?? null
  process.stdout.write(JSON.stringify({ status, accept, protocol, frames }) + '\n')
})
// A server that never closes is given up on; one that does ends us at
// once (a pending timer would hold node for its 20 s).
setTimeout(() => { sock.destroy() }, 20000).unref()
