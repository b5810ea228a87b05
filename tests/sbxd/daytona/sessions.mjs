// Sessions: createSession, executeSessionCommand sync and async (cd and
// export staying, exit codes, stdout and stderr apart), getSessionCommand,
// getSessionCommandLogs, sendSessionCommandInput, listSessions,
// deleteSession.
import { Daytona, out, errInfo } from './daytona.mjs'

const daytona = new Daytona()
const sbx = await daytona.create({ labels: { test: 'sessions' } })
const p = sbx.process
const err = (x) => x.then(() => 'no error', (e) => errInfo(e))
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

await p.createSession('s1')
const dup = await err(p.createSession('s1'))
await p.executeSessionCommand('s1', { command: 'mkdir -p /tmp/sdir && cd /tmp/sdir' })
await p.executeSessionCommand('s1', { command: 'export GREETING="hi there"' })
const persist = await p.executeSessionCommand('s1', { command: 'echo "$PWD $GREETING"; echo to-err >&2' })
const failed = await p.executeSessionCommand('s1', { command: "printf 'a\\nb\\\\c%%'; exit_is() { return $1; }; exit_is 7" })
const async1 = await p.executeSessionCommand('s1', { command: 'read line; echo "got $line"; echo e1 >&2; sleep 0.2', runAsync: true })
const running = await p.getSessionCommand('s1', async1.cmdId)
await p.sendSessionCommandInput('s1', async1.cmdId, 'hello input\n')
let done = running
for (let i = 0; i < 100 && done.exitCode === undefined; i++) {
  await sleep(100)
  done = await p.getSessionCommand('s1', async1.cmdId)
}
const logs = await p.getSessionCommandLogs('s1', async1.cmdId)
const session = await p.getSession('s1')
const list = await p.listSessions()
// A command behind a running one waits its turn.
const slow = await p.executeSessionCommand('s1', { command: 'sleep 0.5; echo first', runAsync: true })
const next = await p.executeSessionCommand('s1', { command: 'echo second' })
const slowLogs = await p.getSessionCommandLogs('s1', slow.cmdId)
// Its log as it comes (a WebSocket), stdout and stderr to their callbacks.
const streamed = await p.executeSessionCommand('s1', { command: 'for i in 1 2 3; do echo out$i; echo err$i >&2; sleep 0.2; done', runAsync: true })
const got = { stdout: '', stderr: '' }
await p.getSessionCommandLogs('s1', streamed.cmdId, (t) => { got.stdout += t }, (t) => { got.stderr += t })
const streamedEnd = await p.getSessionCommand('s1', streamed.cmdId)
// That of a command that has ended: all of it, then the end.
const again = { stdout: '', stderr: '' }
await p.getSessionCommandLogs('s1', streamed.cmdId, (t) => { again.stdout += t }, (t) => { again.stderr += t })
await p.deleteSession('s1')
const gone = await err(p.getSession('s1'))
const goneExec = await err(p.executeSessionCommand('s1', { command: 'true' }))
await sbx.delete()
out({
  dup: dup.status,
  persist: { stdout: persist.stdout, stderr: persist.stderr, exitCode: persist.exitCode },
  failed: { stdout: failed.stdout, exitCode: failed.exitCode },
  async: { idLength: async1.cmdId.length, exitCode: async1.exitCode ?? null, output: async1.output ?? null },
  runningExit: running.exitCode ?? null,
  runningCommand: running.command,
  done: done.exitCode ?? null,
  logs: { stdout: logs.stdout, stderr: logs.stderr },
  session: { sessionId: session.sessionId, n: session.commands.length, codes: session.commands.map((c) => c.exitCode ?? null) },
  list: list.map((s) => s.sessionId),
  next: next.stdout,
  slow: slowLogs.stdout,
  streamed: got,
  streamedExit: streamedEnd.exitCode ?? null,
  again,
  gone: gone.status,
  goneExec: goneExec.status,
})
