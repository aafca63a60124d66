'use strict'
// AbortSignal: cancelling a wait never leaves a lock behind.

const assert = require('node:assert/strict')
const { test } = require('node:test')
const { serve, waitFor } = require('./helper.js')

const env = serve()

test('an aborted signal cancels a wait and rejects with the abort reason, leaving no lock behind', async () => {
  const holder = env.client.lock('abort-wait')
  await holder.acquire()
  const waiter = env.client.lock('abort-wait')
  const controller = new AbortController()
  let settled = false
  const waiting = waiter.acquire({ signal: controller.signal }).finally(() => {
    settled = true
  })
  for (let i = 0; i < 3; i++) await holder.isOwned()
  assert.equal(settled, false, 'still waiting while the lock is held')
  const reason = new Error('stop waiting')
  const abortedAt = Date.now()
  controller.abort(reason)
  const err = await waiting.catch((e) => e)
  assert.equal(err, reason, 'rejects with the signal reason itself')
  assert.ok(Date.now() - abortedAt < 1000, `took ${Date.now() - abortedAt} ms to stop`)
  assert.equal(waiter.fencingToken, null)

  await holder.release()
  // The cancelled waiter never takes the lock: another handle gets it.
  const other = env.client.lock('abort-wait')
  assert.equal(await other.tryAcquire(), true)
  assert.equal(await waiter.isOwned(), false)
  await other.release()
})

test('aborting right after acquire() was called leaves no lock behind, whatever the attempt in flight did', async () => {
  for (let i = 0; i < 20; i++) {
    const lock = env.client.lock('abort-in-flight')
    const controller = new AbortController()
    const attempt = lock.acquire({ signal: controller.signal })
    controller.abort()
    const outcome = await attempt.then(
      () => 'acquired',
      (e) => e,
    )
    if (outcome === 'acquired') {
      // The attempt won the race: the caller holds the lock and releases it.
      await lock.release()
    } else {
      assert.equal(outcome.name, 'AbortError')
    }
    await waitFor(async () => !(await lock.isLocked()), { what: `lock free after round ${i}` })
  }
})

test('an already aborted signal rejects at once with its reason, without acquiring', async () => {
  const lock = env.client.lock('abort-early')
  const reason = new Error('too late')
  const err = await lock.acquire({ signal: AbortSignal.abort(reason) }).catch((e) => e)
  assert.equal(err, reason)
  assert.equal(await lock.isLocked(), false)
})

test('a signal that never aborts changes nothing: acquire() resolves and the lock is held', async () => {
  const lock = env.client.lock('abort-never')
  const controller = new AbortController()
  await lock.acquire({ signal: controller.signal })
  controller.abort() // after the acquisition: no effect on the holding
  assert.equal(await lock.isOwned(), true)
  await lock.release()
  assert.equal(await env.redis.cli('EXISTS', 'rlock:{abort-never}'), '0')
})
