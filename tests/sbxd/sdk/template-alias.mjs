// Template.exists (GET /templates/aliases/NAME): base, served by sbxd, is
// there; a name never built is not.
import { Template, out } from './e2b.mjs'

out({ base: await Template.exists('base'), nope: await Template.exists(`nope-${process.pid}`) })
