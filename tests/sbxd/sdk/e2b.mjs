// e2b.mjs - the official E2B JavaScript SDK for the scripts beside it.
// tests/sbxd/sbxd-sdk.bats installs it with npm into a cache directory and
// names that directory in E2B_SDK_DIR (it is never committed); the SDK reads
// E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY from the environment.
import { createRequire } from 'node:module'
import path from 'node:path'

const dir = process.env.E2B_SDK_DIR
if (!dir) {
  console.error('e2b.mjs: E2B_SDK_DIR is not set')
  process.exit(2)
}
const e2b = createRequire(path.join(dir, 'package.json'))('e2b')

export const {
  Sandbox,
  CommandExitError,
  NotFoundError,
  SandboxNotFoundError,
  FileNotFoundError,
  FileType,
  Secret,
  Template,
  SecretError,
  SecretNotFoundError,
  Volume,
} = e2b

// Print one JSON line: what the bats test asserts with jq.
export function out(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n')
}

// Wait until pred() is true, polling; false after ms.
export async function until(pred, ms = 5000) {
  const end = Date.now() + ms
  while (Date.now() < end) {
    if (await pred()) return true
    await new Promise((r) => setTimeout(r, 20))
  }
  return false
}

// The name of an error's class, and the fields the tests look at.
export function errInfo(e) {
  return {
    name: e?.constructor?.name,
    message: e?.message,
    exitCode: e?.exitCode,
    stderr: e?.stderr,
  }
}
