// commands.run in the foreground: callbacks, result, exit codes, cwd, envs.
import { Sandbox, out } from './e2b.mjs'

const sbx = await Sandbox.connect(process.argv[2])
const seen = []
const r = await sbx.commands.run('echo out1; echo err1 >&2; echo out2', {
  onStdout: (d) => seen.push(['stdout', d]),
  onStderr: (d) => seen.push(['stderr', d]),
})
const env = await sbx.commands.run('echo "$FOO $(pwd) $HOME"', { envs: { FOO: 'bar' }, cwd: '/tmp' })
// A non-zero exit that the caller tolerates: no throw for exit 0 of `|| true`.
const ok = await sbx.commands.run('false || true')
out({
  exitCode: r.exitCode,
  stdout: r.stdout,
  stderr: r.stderr,
  callbacks: {
    stdout: seen.filter((s) => s[0] === 'stdout').map((s) => s[1]).join(''),
    stderr: seen.filter((s) => s[0] === 'stderr').map((s) => s[1]).join(''),
  },
  env: env.stdout,
  okExit: ok.exitCode,
})
