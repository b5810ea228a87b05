// A template whose RUN fails: Template.build throws BuildError with the
// builder's message; Sandbox.create of it is refused.
import { Sandbox, Template, out, errInfo } from './e2b.mjs'

const [ctx, base, name] = process.argv.slice(2)
const t = Template({ fileContextPath: ctx }).fromImage(base).runCmd('exit 7')
let build = null
try {
  await Template.build(t, name)
} catch (e) {
  build = errInfo(e)
}
let create = null
try {
  await Sandbox.create(name)
} catch (e) {
  create = errInfo(e)
}
out({ build, create, exists: await Template.exists(name) })
