// daytona.create(), then process.executeCommand: exit code, output, cwd, env.
import { Daytona, out } from './daytona.mjs'

const daytona = new Daytona()
const sbx = await daytona.create({
  name: process.argv[2],
  labels: { test: 'create' },
  envVars: { FROM_CREATE: 'made' },
})
const ok = await sbx.process.executeCommand('echo "$FROM_CREATE $X"; pwd', '/tmp', { X: 'given' })
const bad = await sbx.process.executeCommand('echo oops >&2; exit 7')
const piped = await sbx.process.executeCommand('printf "a\\nb\\n" | wc -l')
out({
  id: sbx.id,
  name: sbx.name,
  state: sbx.state,
  labels: sbx.labels,
  user: sbx.user,
  snapshot: sbx.snapshot,
  ok: { exitCode: ok.exitCode, result: ok.result },
  bad: { exitCode: bad.exitCode, result: bad.result },
  piped: piped.result.trim(),
  workDir: await sbx.getWorkDir(),
  home: await sbx.getUserHomeDir(),
})
