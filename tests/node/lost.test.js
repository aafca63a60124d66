'use strict'
// Lost leases: the holder is told through lock.signal, and a late release
// never touches another holder's lock.

const assert = require('node:assert/strict')
const { test } = require('node:test')
const { LockLostError, LockNotOwnedError } = require('../../node/index.js')
const { serve, waitFor, aborted } = require('./helper.js')

const env = serve()

test('a lock key deleted from outside aborts lock.signal with an ERR_LOCK_LOST reason', async () => {
  const lock = env.client.lock('deleted', { ttlMs: 900 })
  await lock.acquire()
  const signal = lock.signal
  assert.equal(signal.aborted, false)
  await env.redis.cli('DEL', 'rlock:{deleted}')
  // Renewal runs every ttlMs/3 = 300 ms; allow a loaded machine its slack.
  const reason = await aborted(signal, 3000)
  assert.ok(reason instanceof LockLostError, String(reason))
  assert.equal(reason.code, 'ERR_LOCK_LOST')
  assert.match(reason.message, /deleted/)
  assert.equal(lock.lost, true)
  assert.equal(lock.signal, signal, 'the same signal until a fresh acquisition')
  await assert.rejects(lock.release(), LockNotOwnedError)

  // A fresh acquisition gets a fresh signal.
  await lock.acquire()
  assert.equal(lock.lost, false)
  assert.notEqual(lock.signal, signal)
  assert.equal(lock.signal.aborted, false)
  await lock.release()
})

test('an acquisition inside a lost scope rejects ERR_LOCK_LOST and frees nothing', async () => {
  const lock = env.client.lock('outlived', { ttlMs: 400, autoRenew: false })
  await lock.acquire()
  // Redis keeps the key longer than this client's lease: lost by the clock
  // while the key is still this owner's.
  await env.redis.cli('PEXPIRE', 'rlock:{outlived}', '30000')
  await aborted(lock.signal, 3000)
  const err = await lock.acquire().catch((e) => e)
  assert.ok(err instanceof LockLostError, String(err))
  assert.equal(err.code, 'ERR_LOCK_LOST')
  assert.equal(await env.redis.cli('HGET', 'rlock:{outlived}', 'count'), '1')
  assert.equal(await env.client.lock('outlived').tryAcquire(), false)
  // Redis still held it for this owner: the release frees it.
  await lock.release()
  assert.equal(await env.redis.cli('EXISTS', 'rlock:{outlived}'), '0', 'freed when the scope ended')
  await lock.acquire()
  assert.equal(lock.lost, false)
  await lock.release()
})

test('a signal read before acquire() covers the holding that follows', async () => {
  const lock = env.client.lock('watched-early', { ttlMs: 600 })
  const signal = lock.signal
  await lock.acquire()
  await env.redis.cli('DEL', 'rlock:{watched-early}')
  const reason = await aborted(signal, 3000)
  assert.equal(reason.code, 'ERR_LOCK_LOST')
})

test('release after the lease expired rejects ERR_LOCK_NOT_OWNED and leaves the new holder intact', async () => {
  const first = env.client.lock('expired', { ttlMs: 300, autoRenew: false })
  await first.acquire()
  await waitFor(async () => (await env.redis.cli('EXISTS', 'rlock:{expired}')) === '0', {
    timeoutMs: 3000,
    what: 'the lease running out',
  })
  const second = env.client.lock('expired')
  await second.acquire()
  const owner = await env.redis.cli('HGET', 'rlock:{expired}', 'owner')

  const err = await first.release().catch((e) => e)
  assert.ok(err instanceof LockNotOwnedError, String(err))
  assert.equal(err.code, 'ERR_LOCK_NOT_OWNED')
  assert.equal(err.reason, 'held by another owner')
  assert.equal(await env.redis.cli('HGET', 'rlock:{expired}', 'owner'), owner)
  assert.equal(await second.isOwned(), true)
  await second.release()
})
