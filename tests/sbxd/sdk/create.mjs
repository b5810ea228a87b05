// Sandbox.create, then what the SDK knows of it.
import { Sandbox, out, errInfo } from './e2b.mjs'

const sbx = await Sandbox.create({ metadata: { test: 'create' }, timeoutMs: 120_000 })
const info = await sbx.getInfo()
out({
  sandboxId: sbx.sandboxId,
  running: await sbx.isRunning(),
  state: info.state,
  templateId: info.templateId,
  metadata: info.metadata,
  envdVersion: info.envdVersion,
  lifeSecs: Math.round((info.endAt - info.startedAt) / 1000),
  // a key sbxd does not know (a made-up one, not E2B_API_KEY)
  wrongKey: await Sandbox.create({ apiKey: `e2b_${'0'.repeat(32)}` }).then(
    () => 'no error',
    (e) => errInfo(e).name,
  ),
})
