// watchDir while files.write makes a file and then writes over it: the
// events envd sends (a client waits for "write"), in order.
import { Sandbox, out, until } from './e2b.mjs'

const sbx = await Sandbox.connect(process.argv[2])
const d = '/home/user/watched'
await sbx.files.makeDir(d)
let events = []
const h = await sbx.files.watchDir(d, (e) => events.push(`${e.type}:${e.name}`))
const step = async (data) => {
  events = []
  await sbx.files.write(`${d}/f.txt`, data)
  await until(() => events.includes('write:f.txt'), 5000)
  // what else comes for the same write
  await new Promise((r) => setTimeout(r, 300))
  return events
}
const res = {}
res.fresh = await step('first')
res.over = await step('second, longer')
res.content = await sbx.files.read(`${d}/f.txt`)
await h.stop()
out(res)
