'use strict'
// The semaphore: at most `permits` held at once, each acquisition taking one
// or more of them under its own lease. It is a Lock taking one permit unless
// told otherwise: its owner (the handle, or a using() scope) nests, renews
// and is told of a loss as the mutex's is. Bad permits are rows of the
// invalid-argument matrix (validation.test.js).

const assert = require('node:assert/strict')
const { test } = require('node:test')
const { Lock, LockLostError, LockTimeoutError, Semaphore } = require('../../node/index.js')
const { serve, waitFor, aborted, within } = require('./helper.js')

const env = serve()

const key = (name) => `rlock:{${name}}:semaphore`
const inLine = async (name) => Number(await env.redis.cli('LLEN', `${key(name)}:queue`))

test('never more than its permits are held, with sixteen handles side by side', async () => {
  const permits = 3
  let inside = 0
  let most = 0
  const worker = async () => {
    const sem = env.client.semaphore('sixteen', { permits, timeoutMs: 20000 })
    for (let round = 0; round < 5; round++) {
      await sem.acquire()
      inside += 1
      most = Math.max(most, inside)
      assert.ok(inside <= permits, `${inside} holders of ${permits} permits`)
      // Round trips to Redis: time for any other handle to get in if it could.
      assert.ok((await sem.held()) <= permits)
      assert.equal(await sem.isOwned(), true)
      inside -= 1
      await sem.release()
    }
  }
  await within(Promise.all(Array.from({ length: 16 }, worker)), 60000, 'the workers')
  assert.equal(most, permits, 'every permit was used')
  assert.equal(await env.redis.cli('EXISTS', key('sixteen')), '0')
})

test('an acquisition may take several permits; a request waits until as many are free', async () => {
  const sem = () => env.client.semaphore('several', { permits: 3, timeoutMs: 0 })
  const two = sem()
  assert.ok(two instanceof Semaphore && two instanceof Lock)
  assert.equal(two.size, 3)
  assert.equal(two.name, 'several')
  await two.acquire({ permits: 2 })
  assert.equal(await two.held(), 2)
  assert.equal(await two.available(), 1)
  const other = sem()
  assert.equal(await other.tryAcquire({ permits: 2 }), false)
  assert.equal(await other.isLocked(), false, 'one permit is free')
  assert.equal(await other.tryAcquire(), true)
  assert.notEqual(other.fencingToken, two.fencingToken, 'every acquisition its own token')
  assert.equal(await other.isLocked(), true, 'no permit free')
  const waiter = env.client.semaphore('several', { permits: 3, timeoutMs: 10000, queueAfterMs: 0 })
  const waiting = waiter.acquire({ permits: 2 })
  await waitFor(async () => (await inLine('several')) === 1, { what: 'the waiter in line' })
  await other.release()
  assert.equal(await waiter.isOwned(), false, 'one free permit does not serve two')
  await two.release()
  await within(waiting, 5000, "the waiter's acquisition")
  assert.equal(await waiter.held(), 2)
  assert.ok(waiter.fencingToken > two.fencingToken)
  await waiter.release()
  assert.equal(await waiter.available(), 3)
})

test('its owner acquiring again nests and takes no more permits; another number of permits is refused', async () => {
  const sem = env.client.semaphore('nest', { permits: 3, timeoutMs: 0 })
  await sem.acquire({ permits: 2 })
  const token = sem.fencingToken
  await sem.acquire({ permits: 2 })
  assert.equal(sem.fencingToken, token, 'the same holding')
  assert.equal(await sem.held(), 2)
  await assert.rejects(sem.acquire(), { name: 'RangeError', code: 'ERR_INVALID_ARG', message: /permits/ })
  await sem.release()
  assert.equal(await sem.held(), 2, 'one release of two leaves it held')
  await sem.release()
  assert.equal(await sem.held(), 0)
})

test('using() holds the permits for the callback, whose flow shares its owner', async () => {
  const sem = env.client.semaphore('scope', { permits: 3, timeoutMs: 0 })
  const outsider = env.client.semaphore('scope', { permits: 3, timeoutMs: 0 })
  const value = await sem.using({ permits: 3 }, async (signal, held) => {
    assert.equal(held, sem)
    assert.equal(signal.aborted, false)
    assert.equal(await sem.held(), 3)
    // Made in the scope's flow: the scope's owner, so it nests.
    const inner = env.client.semaphore('scope', { permits: 3, timeoutMs: 0 })
    assert.equal(await inner.tryAcquire({ permits: 3 }), true)
    assert.equal(inner.fencingToken, sem.fencingToken)
    await inner.release()
    assert.equal(await outsider.tryAcquire(), false, 'a handle made outside is another owner')
    return 'done'
  })
  assert.equal(value, 'done')
  assert.equal(await sem.available(), 3, 'released after the callback')
  assert.equal(await sem.using(() => 'one permit'), 'one permit')
})

test('a size other than the one held is refused, naming both', async () => {
  const three = env.client.semaphore('sizes', { permits: 3 })
  await three.acquire()
  const four = env.client.semaphore('sizes', { permits: 4, timeoutMs: 0 })
  await assert.rejects(four.acquire(), { name: 'RangeError', code: 'ERR_INVALID_ARG', message: /4[\s\S]*3/ })
  await three.release()
  assert.equal(await four.tryAcquire(), true, 'nobody holds it: any size')
  await four.release()
})

test('a wait for permits ends at its timeout or with its signal, and takes nothing', async () => {
  const holder = env.client.semaphore('wait', { permits: 2 })
  await holder.acquire({ permits: 2 })
  const late = env.client.semaphore('wait', { permits: 2, timeoutMs: 200 })
  await assert.rejects(late.acquire(), LockTimeoutError)
  const reason = new Error('gave up')
  const forever = env.client.semaphore('wait', { permits: 2 })
  await assert.rejects(forever.acquire({ permits: 1, signal: AbortSignal.abort(reason) }), (e) => e === reason)
  await holder.release()
  assert.equal(await holder.available(), 2)
})

test('a lost lease of several permits aborts the signal, whichever handle took them', async () => {
  const sem = env.client.semaphore('lost', { permits: 3, ttlMs: 600 })
  const signal = sem.signal // watched before the acquisition of two
  await sem.acquire({ permits: 2 })
  await env.redis.cli('DEL', key('lost'))
  const reason = await aborted(signal, 3000)
  assert.ok(reason instanceof LockLostError, String(reason))
  assert.equal(sem.lost, true)
  await assert.rejects(sem.release(), { code: 'ERR_LOCK_NOT_OWNED', reason: 'expired' })
  const again = env.client.semaphore('lost', { permits: 3, ttlMs: 600 })
  const err = await again
    .using({ permits: 2 }, async (s) => {
      await env.redis.cli('DEL', key('lost'))
      await aborted(s, 3000)
    })
    .catch((e) => e)
  assert.ok(err instanceof LockLostError, String(err))
})
