'use strict'
// Process lifetime: nothing of the client keeps Node alive after close(), and
// no lost-lock notice is ever an unhandled rejection. Each case runs in a
// child process that must exit by itself.

const assert = require('node:assert/strict')
const { test } = require('node:test')
const { serve, runChild } = require('./helper.js')

const env = serve({ client: false })

test('the process exits by itself after close(), even after waiting, watching and holding locks', async () => {
  const started = Date.now()
  const { code, output } = await runChild(`async (url) => {
    const client = await Client.connect(url)
    const a = client.lock('life')
    await a.acquire()
    void a.signal // a lost-lock watch is in place
    const b = client.lock('life', { timeoutMs: 200 })
    await b.acquire().catch(() => {}) // a wait that used the pub/sub connection
    await a.release()
    const held = client.lock('life-held')
    await held.acquire()
    void held.signal
    await client.close()
    console.log('closed')
  }`, env.redis.url)
  assert.equal(code, 0, output)
  assert.match(output, /closed/)
  assert.ok(Date.now() - started < 8000, `took ${Date.now() - started} ms to exit`)
})

test('a client that is never closed does not keep the process alive either', async () => {
  const { code, output } = await runChild(`async (url) => {
    const client = await Client.connect(url)
    const lock = client.lock('life-unclosed', { ttlMs: 2000 })
    await lock.acquire()
    void lock.signal
    console.log('leaving with the lock held')
  }`, env.redis.url)
  assert.equal(code, 0, output)
  assert.match(output, /leaving/)
  // Not released: the lock stays until its lease runs out.
  assert.equal(await env.redis.cli('EXISTS', 'rlock:{life-unclosed}'), '1')
})

test('a lease lost with nobody listening is never an unhandled rejection', async () => {
  const { code, output } = await runChild(`async (url) => {
    process.on('unhandledRejection', (e) => { console.error('UNHANDLED', e); process.exit(4) })
    const client = await Client.connect(url)
    const lock = client.lock('life-lost', { ttlMs: 200, autoRenew: false })
    await lock.acquire()
    const signal = lock.signal // watched, but no listener on it
    const deadline = Date.now() + 5000
    while (!signal.aborted && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20))
    if (!signal.aborted) throw new Error('loss not reported')
    await client.close()
    console.log('lost and exited')
  }`, env.redis.url)
  assert.equal(code, 0, output)
  assert.match(output, /lost and exited/)
  assert.doesNotMatch(output, /UNHANDLED/)
})
