// metrics: getMetrics on a sandbox holding 64 MiB and burning a CPU, the
// static Sandbox.getMetrics, a window in the past, and a killed sandbox.
import { Sandbox, SandboxNotFoundError, out, errInfo } from './e2b.mjs'

const sbx = await Sandbox.create({ timeoutMs: 120_000 })
await sbx.commands.run(
  'a=$(head -c 67108864 /dev/zero | tr "\\0" x); while :; do :; done',
  { background: true },
)
let last = []
let held = false
// Until the shell holds the 64 MiB (bounded: 30 s).
for (let i = 0; i < 120 && !held; i++) {
  last = await sbx.getMetrics()
  held = last.length === 1 && last[0].memUsed >= 64 * 1024 * 1024
  if (!held) await new Promise((r) => setTimeout(r, 250))
}
const m = last[0] ?? {}
const byId = await Sandbox.getMetrics(sbx.sandboxId)
const past = await sbx.getMetrics({
  start: new Date(Date.now() - 3_600_000),
  end: new Date(Date.now() - 1_800_000),
})
await sbx.kill()
let gone
try {
  await Sandbox.getMetrics(sbx.sandboxId)
  gone = null
} catch (e) {
  gone = { notFound: e instanceof SandboxNotFoundError, ...errInfo(e) }
}
out({
  held,
  count: last.length,
  metric: { ...m, timestamp: m.timestamp?.toISOString?.() },
  ageS: m.timestamp ? Math.abs(Date.now() - m.timestamp.getTime()) / 1000 : null,
  byId: byId.length,
  byIdCpu: byId[0]?.cpuUsedPct,
  past: past.length,
  gone,
})
