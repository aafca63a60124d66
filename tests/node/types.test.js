'use strict'
// The TypeScript declarations: `tsc --noEmit` over a typed usage file.

const assert = require('node:assert/strict')
const { execFile } = require('node:child_process')
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
