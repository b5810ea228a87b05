// create({image}) (buildInfo: a Dockerfile the server builds), with a
// size; then the same image again (one build). The first is left for the
// test to look at (and delete).
import { Daytona, Image, out } from './daytona.mjs'

const [base] = process.argv.slice(2)
const daytona = new Daytona()
const image = Image.base(base).runCommands('echo built-by-image > /etc/built')
const a = await daytona.create({ image, resources: { cpu: 2, memory: 2 } }, { timeout: 120 })
const ra = await a.process.executeCommand('cat /etc/built')
const b = await daytona.create({ image }, { timeout: 120 })
const rb = await b.process.executeCommand('cat /etc/built')
const res = {
  a: { id: a.id, state: a.state, cpu: a.cpu, memory: a.memory, snapshot: a.snapshot, run: ra.result.trim() },
  b: { id: b.id, state: b.state, snapshot: b.snapshot, run: rb.result.trim() },
}

await b.delete()
out(res)
