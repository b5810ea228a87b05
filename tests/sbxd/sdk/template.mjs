// Template.build on sbxd with the SDK's builder (fromImage, copy, runCmd,
// setEnvs, setWorkdir, setStartCmd), then Sandbox.create of the template by its name.
// argv: context dir, base image, template name. Prints one JSON line.
import { Sandbox, Template, out, errInfo } from './e2b.mjs'

const [ctx, base, name] = process.argv.slice(2)
const logs = []
const t = Template({ fileContextPath: ctx })
  .fromImage(base)
  .copy('hello.txt', '/app/hello.txt')
  .copy('sub/', '/app/sub/')
  .runCmd(['echo built > /app/built', 'mkdir -p /home/user'])
  .setEnvs({ GREETING: 'hi there', QUOTED: 'a "b" $c' })
  .setWorkdir('/app')
  .setStartCmd('echo started > /tmp/started; exec sleep 1000', 'test -f /tmp/started')
let info
try {
  info = await Template.build(t, name, {
    onBuildLogs: (e) => logs.push(e.message),
  })
} catch (e) {
  out({ buildError: errInfo(e), logs })
  process.exit(0)
}
const exists = await Template.exists(name)
const sbx = await Sandbox.create(name)
const r = await sbx.commands.run(
  // (the start command's file is root's, mode 0600: its presence only)
  'cat /app/hello.txt /app/sub/deep.txt /app/built; test -e /tmp/started && echo started; echo "$GREETING|$QUOTED"; pwd',
)
// A second build of the same template: every upload already there.
const logs2 = []
await Template.build(t, name, { onBuildLogs: (e) => logs2.push(e.message) })
out({
  templateId: info.templateId,
  name: info.name,
  exists,
  stdout: r.stdout,
  sandboxTemplate: sbx.sandboxId ? (await sbx.getInfo()).templateId : null,
  logs,
  logs2,
})
await sbx.kill()
