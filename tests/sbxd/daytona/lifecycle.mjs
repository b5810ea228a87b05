// get by name, list by labels, setLabels, stop/start, delete (then 404).
import { Daytona, out, errInfo } from './daytona.mjs'

const [name, tag] = process.argv.slice(2)
const daytona = new Daytona()
const sbx = await daytona.create({ name, labels: { suite: tag } })
const byName = await daytona.get(name)
const listed = []
for await (const s of daytona.list({ labels: { suite: tag } })) listed.push(s.id)
const none = []
for await (const s of daytona.list({ labels: { suite: `${tag}-none` } })) none.push(s.id)
const labels = await sbx.setLabels({ suite: tag, after: 'set' })
await sbx.setAutostopInterval(30)
const autoStop = (await daytona.get(sbx.id)).autoStopInterval
await sbx.stop()
const stopped = sbx.state
const execStopped = await sbx.process.executeCommand('true').then(
  () => 'no error',
  (e) => errInfo(e).status,
)
const refetched = (await daytona.get(sbx.id)).state
await sbx.start()
const started = sbx.state
const after = await sbx.process.executeCommand('echo back')
await sbx.delete()
const gone = await daytona.get(sbx.id).then(
  () => 'still there',
  (e) => errInfo(e),
)
out({
  id: sbx.id,
  byName: byName.id,
  listed,
  none,
  labels,
  autoStop,
  stopped,
  execStopped,
  refetched,
  started,
  after: after.result,
  gone,
})
