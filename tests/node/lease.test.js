'use strict'
// Leases: the watchdog renews, autoRenew: false expires, maxHoldMs caps.

const assert = require('node:assert/strict')
const { test } = require('node:test')
const { LockLostError } = require('../../node/index.js')
const { serve, waitFor, aborted } = require('./helper.js')

const env = serve()

test('the watchdog keeps a 1000 ms lease alive for 4 s', async () => {
  const lock = env.client.lock('renewed', { ttlMs: 1000 })
  await lock.acquire()
  const token = lock.fencingToken
  const until = Date.now() + 4000
  let checks = 0
  while (Date.now() < until) {
    const pttl = Number(await env.redis.cli('PTTL', 'rlock:{renewed}'))
    assert.ok(pttl > 0 && pttl <= 1000, `lease ${pttl} ms after ${4000 - (until - Date.now())} ms`)
    assert.equal(lock.lost, false)
    checks++
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  assert.ok(checks >= 10, `only ${checks} observations`)
  assert.equal(await lock.isOwned(), true)
  assert.equal(lock.fencingToken, token, 'the same holding all along')
  assert.equal(lock.signal.aborted, false)
  await lock.release()
})

test('autoRenew: false lets the lease run out: the key expires and the lock reports lost', async () => {
  const lock = env.client.lock('unrenewed', { ttlMs: 400, autoRenew: false })
  await lock.acquire()
  const signal = lock.signal
  const start = Date.now()
  await waitFor(async () => (await env.redis.cli('EXISTS', 'rlock:{unrenewed}')) === '0', {
    timeoutMs: 3000,
    what: 'the key expiring',
  })
  assert.ok(Date.now() - start >= 300, `expired after ${Date.now() - start} ms`)
  const reason = await aborted(signal, 3000)
  assert.ok(reason instanceof LockLostError)
  assert.equal(lock.lost, true)
  await assert.rejects(lock.release(), { code: 'ERR_LOCK_NOT_OWNED' })
})

test('maxHoldMs caps the hold: renewal stops so the lease ends by then', async () => {
  const lock = env.client.lock('capped', { ttlMs: 600, maxHoldMs: 1500 })
  const start = Date.now()
  await lock.acquire()
  const reason = await aborted(lock.signal, 5000)
  const heldFor = Date.now() - start
  assert.ok(reason instanceof LockLostError)
  assert.match(reason.reason, /max_hold/)
  // Renewed past one lease (600 ms), ended by maxHoldMs (plus scheduling slack).
  assert.ok(heldFor >= 1400 && heldFor < 2500, `held for ${heldFor} ms`)
  await waitFor(async () => (await env.redis.cli('EXISTS', 'rlock:{capped}')) === '0', {
    timeoutMs: 1000,
    what: 'the key gone by maxHoldMs',
  })
  assert.ok(Date.now() - start < 2500)
})
