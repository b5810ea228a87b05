// A background command: commands.list, sendStdin, its output, kill.
import { Sandbox, CommandExitError, out, until, errInfo } from './e2b.mjs'

const sbx = await Sandbox.connect(process.argv[2])
let got = ''
const h = await sbx.commands.run('while read l; do echo "got:$l"; done', {
  background: true,
  stdin: true,
  onStdout: (d) => { got += d },
})
const listed = await sbx.commands.list()
const mine = listed.find((p) => p.pid === h.pid)
await sbx.commands.sendStdin(h.pid, 'hello\n')
const echoed = await until(() => got.includes('got:hello'))
const killed = await sbx.commands.kill(h.pid)
let waited
try {
  const r = await h.wait()
  waited = { threw: false, exitCode: r.exitCode }
} catch (e) {
  waited = { threw: true, isCommandExitError: e instanceof CommandExitError, ...errInfo(e) }
}
const after = await sbx.commands.list()
out({
  pid: h.pid,
  listed: !!mine,
  listedCmd: mine?.cmd,
  listedArgs: mine?.args,
  echoed,
  got,
  killed,
  waited,
  stillListed: after.some((p) => p.pid === h.pid),
  killAgain: await sbx.commands.kill(h.pid),
})
