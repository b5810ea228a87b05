// snapshot.create from an image of the test registry (with a size),
// get, list, a sandbox from it (its size), delete (then 404).
import { Daytona, out, errInfo } from './daytona.mjs'

const [name, image] = process.argv.slice(2)
const daytona = new Daytona()
const made = await daytona.snapshot.create(
  { name, image, resources: { cpu: 1, memory: 1, disk: 1 } },
  { timeout: 120 },
)
const got = await daytona.snapshot.get(name)
const list = await daytona.snapshot.list(1, 100)
const sbx = await daytona.create({ snapshot: name }, { timeout: 60 })
const run = await sbx.process.executeCommand('echo from-snapshot')
const size = { cpu: sbx.cpu, memory: sbx.memory, snapshot: sbx.snapshot }
await sbx.delete()
await daytona.snapshot.delete(got)
const gone = await daytona.snapshot.get(name).then(
  () => 'still there',
  (e) => errInfo(e),
)
out({
  made: { state: made.state, name: made.name, cpu: made.cpu, mem: made.mem, disk: made.disk, imageName: made.imageName },
  got: { id: got.id, state: got.state },
  listed: list.items.map((s) => [s.name, s.general, s.state]),
  total: list.total,
  id: sbx.id,
  run: run.result.trim(),
  size,
  gone,
})
