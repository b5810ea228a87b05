// archive: refused while started, archived once stopped, started again.
import { Daytona, out, errInfo } from './daytona.mjs'

const daytona = new Daytona()
const sbx = await daytona.create({}, { timeout: 60 })
const running = await sbx.archive().then(() => 'archived', (e) => errInfo(e))
await sbx.process.executeCommand('echo kept > /home/user/kept')
await sbx.stop()
await sbx.archive()
const archived = sbx.state
const listed = (await daytona.get(sbx.id)).state
await sbx.start()
const started = sbx.state
const kept = await sbx.process.executeCommand('cat /home/user/kept')
await sbx.delete()
out({ running, archived, listed, started, kept: kept.result.trim() })
