// files.list with depth: envd's walk, name-sorted and depth-first (each
// directory followed by what it holds, no deeper than asked).
import { Sandbox, out } from './e2b.mjs'

const sbx = await Sandbox.connect(process.argv[2])
const d = '/home/user/tree'
// made in an order that is neither sorted nor its reverse
await sbx.commands.run(`mkdir -p ${d}/b/x ${d}/a/m/deep && touch ${d}/b/y ${d}/b/x/f ${d}/c ${d}/a/z ${d}/a/m/deep/g`)
const names = async (depth) =>
  (await sbx.files.list(d, { depth })).map((e) => e.path.slice(d.length + 1))
out({ one: await names(1), two: await names(2), three: await names(3) })
