'use strict'
// A lease over an hour warns once per process (RLOCK_LONG_TTL): it most
// often means seconds written as milliseconds. Each case runs in a child
// process, as the warning is given once per process.

const assert = require('node:assert/strict')
const { test } = require('node:test')
const { serve, runChild } = require('./helper.js')

const env = serve({ client: false })

/** The child's body: records each warning, makes `locks`, then prints the warnings as JSON. */
function recording(locks) {
  return `async (url) => {
    const warnings = []
    process.on('warning', (w) => warnings.push({ name: w.name, code: w.code, message: w.message }))
    const client = await Client.connect(url)
    ${locks}
    // Warnings are emitted on the next tick.
    await new Promise((resolve) => setImmediate(resolve))
    await client.close()
    console.log(JSON.stringify(warnings))
  }`
}

async function warningsOf(locks) {
  const { code, output } = await runChild(recording(locks), env.redis.url)
  assert.equal(code, 0, output)
  return JSON.parse(output.trim().split('\n').pop())
}

test('a lease over an hour warns once per process, naming ttlMs and how to say it is meant', async () => {
  const warnings = await warningsOf(`
    client.lock('short', { ttlMs: 3_600_000 })
    client.lock('day', { ttlMs: 86_400_000 })
    client.lock('week', { ttlMs: 604_800_000 })
    await client.using('day', { ttlMs: 86_400_000 }, () => {})
  `)
  assert.equal(warnings.length, 1, JSON.stringify(warnings))
  const [warning] = warnings
  assert.equal(warning.code, 'RLOCK_LONG_TTL')
  assert.match(warning.message, /ttlMs=86400000/)
  assert.match(warning.message, /maxHoldMs/)
  assert.match(warning.message, /allowLongTtl/)
})

test('allowLongTtl or maxHoldMs says a long lease is meant: no warning', async () => {
  const warnings = await warningsOf(`
    client.lock('day', { ttlMs: 86_400_000, allowLongTtl: true })
    client.lock('day', { ttlMs: 86_400_000, maxHoldMs: 90_000_000 })
    await client.using('day', { ttlMs: 86_400_000, allowLongTtl: true }, () => {})
  `)
  assert.deepEqual(warnings, [])
})
