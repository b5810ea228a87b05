// uploadUrl and downloadUrl of secure sandboxes, for a plain HTTP client:
// with E2B_SANDBOX_URL the SDK gives every sandbox the same base URL, so
// the signature alone names the sandbox. Prints the URLs (argv[2] is
// "urls"), or, with "expired", one that expires in a second.
import { Sandbox, out } from './e2b.mjs'

const a = await Sandbox.create({ timeoutMs: 120_000 })
const b = await Sandbox.create({ timeoutMs: 120_000 })
await a.files.write('/home/user/which.txt', 'sandbox a\n')
await b.files.write('/home/user/which.txt', 'sandbox b\n')
out({
  a: a.sandboxId,
  b: b.sandboxId,
  downA: await a.downloadUrl('/home/user/which.txt'),
  downB: await b.downloadUrl('/home/user/which.txt'),
  upB: await b.uploadUrl('/home/user/up.txt'),
  upBack: await b.downloadUrl('/home/user/up.txt'),
  expired: await a.downloadUrl('/home/user/which.txt', { useSignatureExpiration: 1 }),
  later: await a.downloadUrl('/home/user/which.txt', { useSignatureExpiration: 600 }),
})
