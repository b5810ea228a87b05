// A failing command raises CommandExitError with its exit code and stderr.
import { Sandbox, CommandExitError, out, errInfo } from './e2b.mjs'

const sbx = await Sandbox.connect(process.argv[2])
const res = {}
try {
  await sbx.commands.run('echo partial; echo "it broke" >&2; exit 7')
  res.threw = false
} catch (e) {
  res.threw = true
  res.isCommandExitError = e instanceof CommandExitError
  Object.assign(res, errInfo(e), { stdout: e.stdout })
}
out(res)
