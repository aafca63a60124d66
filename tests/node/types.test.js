'use strict'
// The TypeScript declarations: `tsc --noEmit` over a typed usage file, and
// the lock options they list against the ones the addon reads.

const assert = require('node:assert/strict')
const { execFile } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')
const { test } = require('node:test')

test('index.d.ts type-checks a typed usage of the whole API, and rejects the misuses it marks', async () => {
  const tsc = require.resolve('typescript/bin/tsc')
  const project = path.join(__dirname, 'types', 'tsconfig.json')
  const { code, output } = await new Promise((resolve) => {
    execFile(process.execPath, [tsc, '--noEmit', '-p', project], (err, stdout, stderr) => {
      resolve({ code: err ? err.code : 0, output: stdout + stderr })
    })
  })
  assert.equal(code, 0, output)
})

test("index.d.ts's LockOptions are exactly the options the addon reads", () => {
  const native = require('../../node/native.js')
  const declared = fs.readFileSync(path.join(__dirname, '..', '..', 'node', 'index.d.ts'), 'utf8')
  const body = declared.match(/export interface LockOptions \{([\s\S]*?)\n\}/)[1]
  const documented = [...body.matchAll(/^ {2}(\w+)\?:/gm)].map((m) => m[1])
  assert.deepEqual(documented.sort(), native.lockOptionNames().sort())
})
