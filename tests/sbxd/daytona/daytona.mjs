// daytona.mjs - the official Daytona TypeScript SDK for the scripts beside
// it. tests/sbxd/sbxd-daytona.bats installs it with npm into a cache
// directory and names that directory in DAYTONA_SDK_DIR (it is never
// committed); the SDK reads DAYTONA_API_URL and DAYTONA_API_KEY from the
// environment.
import { createRequire } from 'node:module'
import path from 'node:path'

const dir = process.env.DAYTONA_SDK_DIR
if (!dir) {
  console.error('daytona.mjs: DAYTONA_SDK_DIR is not set')
  process.exit(2)
}
const sdk = createRequire(path.join(dir, 'package.json'))('@daytonaio/sdk')

export const { Daytona, DaytonaError, DaytonaNotFoundError, Image } = sdk

// Print one JSON line: what the bats test asserts with jq. Then exit: the
// SDK's event socket (Socket.IO, which sbxd does not serve) may still be
// retrying, and would keep node alive.
export function out(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n', () => process.exit(0))
}

// What an error was: its class, status and message.
export function errInfo(e) {
  return {
    name: e?.constructor?.name,
    status: e?.statusCode ?? e?.response?.status,
    message: String(e?.message ?? e),
  }
}
