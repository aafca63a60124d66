'use strict'
// client.using(): acquire, run, always release; the callback's outcome wins.

const assert = require('node:assert/strict')
const { test } = require('node:test')
const { Lock, LockLostError } = require('../../node/index.js')
const { serve, aborted } = require('./helper.js')

const env = serve()

test('using() runs the callback while holding the lock and returns its value', async () => {
  const value = await env.client.using('scoped', { ttlMs: 5000 }, async (signal, lock) => {
    assert.ok(signal instanceof AbortSignal)
    assert.equal(signal.aborted, false)
    assert.ok(lock instanceof Lock)
    assert.equal(lock.name, 'scoped')
    assert.equal(await lock.isOwned(), true)
    assert.equal(typeof lock.fencingToken, 'number')
    return 'done'
  })
  assert.equal(value, 'done')
  assert.equal(await env.redis.cli('EXISTS', 'rlock:{scoped}'), '0', 'released after the callback')
})

test('using() accepts the callback in place of options', async () => {
  assert.equal(await env.client.using('scoped-short', () => 7), 7)
  assert.equal(await env.redis.cli('EXISTS', 'rlock:{scoped-short}'), '0')
})

test('using() releases when the callback throws, and the caller sees the callback error', async () => {
  const thrown = new Error('callback failed')
  const err = await env.client
    .using('scoped-throw', async () => {
      throw thrown
    })
    .catch((e) => e)
  assert.equal(err, thrown)
  assert.equal(await env.redis.cli('EXISTS', 'rlock:{scoped-throw}'), '0', 'released after the throw')
})

test('a failing release never masks the callback error', async () => {
  const thrown = new Error('the real problem')
  const err = await env.client
    .using('scoped-masked', async () => {
      // The release that follows will find the lock gone.
      await env.redis.cli('DEL', 'rlock:{scoped-masked}')
      throw thrown
    })
    .catch((e) => e)
  assert.equal(err, thrown)
})

test('a lease lost while the callback ran aborts its signal and using() rejects ERR_LOCK_LOST', async () => {
  let seen
  const err = await env.client
    .using('scoped-lost', { ttlMs: 600 }, async (signal) => {
      await env.redis.cli('DEL', 'rlock:{scoped-lost}')
      seen = await aborted(signal, 3000)
      return 'finished anyway'
    })
    .catch((e) => e)
  assert.ok(seen instanceof LockLostError, String(seen))
  assert.ok(err instanceof LockLostError, String(err))
  assert.equal(err.code, 'ERR_LOCK_LOST')
})

test('using() waits for the lock like acquire(), within timeoutMs', async () => {
  const holder = env.client.lock('scoped-busy')
  await holder.acquire()
  const err = await env.client.using('scoped-busy', { timeoutMs: 100 }, () => 'never').catch((e) => e)
  assert.equal(err.code, 'ERR_LOCK_TIMEOUT')
  await holder.release()
})

test('using() takes a signal in its options that cancels the wait for the lock', async () => {
  const holder = env.client.lock('scoped-cancel')
  await holder.acquire()
  const reason = new Error('gave up')
  let ran = false
  const err = await env.client
    .using('scoped-cancel', { signal: AbortSignal.abort(reason) }, () => {
      ran = true
    })
    .catch((e) => e)
  assert.equal(err, reason)
  assert.equal(ran, false)
  const controller = new AbortController()
  const waiting = env.client.using('scoped-cancel', { signal: controller.signal }, () => 'never').catch((e) => e)
  assert.equal(await holder.isOwned(), true)
  controller.abort(reason)
  assert.equal(await waiting, reason)
  await holder.release()
  assert.equal(await env.redis.cli('EXISTS', 'rlock:{scoped-cancel}'), '0', 'the cancelled waiter took nothing')
})
