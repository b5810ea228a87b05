// Template.build from an image of a registry that wants credentials: the
// SDK's fromImage(ref, {username, password}) (fromImageRegistry type
// "registry"), or with "aws" fromAWSRegistry (refused by sbxd).
// argv: context dir, image, template name, username, password, [aws].
// Prints one JSON line: the build's error or its name, and the logs.
import { Template, out, errInfo } from './e2b.mjs'

const [ctx, image, name, username, password, kind] = process.argv.slice(2)
const logs = []
let t = Template({ fileContextPath: ctx })
t = kind === 'aws'
  ? t.fromAWSRegistry(image, { accessKeyId: username, secretAccessKey: password, region: 'eu-west-1' })
  : t.fromImage(image, { username, password })
t = t.runCmd('echo pulled > /pulled')
try {
  const info = await Template.build(t, name, {
    onBuildLogs: (e) => logs.push(e.message),
  })
  out({ name: info.name, logs })
} catch (e) {
  out({ build: errInfo(e), logs })
}
