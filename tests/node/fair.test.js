'use strict'
// Fair mode: waiters queue in Redis in arrival order and a release hands the
// lock straight to the next one; an aborted wait leaves the line and strands
// nothing.

const assert = require('node:assert/strict')
const { test } = require('node:test')
const { serve, waitFor } = require('./helper.js')

const env = serve()

const inLine = async (name) => Number(await env.redis.cli('LLEN', `rlock:{${name}}:queue`))

test('handles get the lock in arrival order', async () => {
  const holder = env.client.lock('fair-order', { fair: true })
  await holder.acquire()
  const order = []
  const waiting = []
  for (let i = 0; i < 4; i++) {
    const lock = env.client.lock('fair-order', { fair: true, timeoutMs: 20000 })
    waiting.push(
      lock.acquire().then(async () => {
        order.push(i)
        await lock.release()
      }),
    )
    await waitFor(async () => (await inLine('fair-order')) === i + 1, { what: `waiter ${i} in line` })
  }
  await holder.release()
  await Promise.all(waiting)
  assert.deepEqual(order, [0, 1, 2, 3])
})

test('an aborted fair wait leaves no entry, and the lock is never handed to it', async () => {
  const holder = env.client.lock('fair-abort', { fair: true })
  await holder.acquire()
  const waiter = env.client.lock('fair-abort', { fair: true })
  const controller = new AbortController()
  const waiting = waiter.acquire({ signal: controller.signal }).catch((e) => e)
  await waitFor(async () => (await inLine('fair-abort')) === 1, { what: 'the waiter in line' })
  const reason = new Error('stop waiting')
  controller.abort(reason)
  assert.equal(await waiting, reason)
  await waitFor(async () => (await inLine('fair-abort')) === 0, { what: 'the line empty' })
  await holder.release()
  assert.equal(await holder.isLocked(), false, 'nobody in line: the release frees it')
})

test('a timed-out fair wait leaves no entry', async () => {
  const holder = env.client.lock('fair-timeout', { fair: true })
  await holder.acquire()
  const waiter = env.client.lock('fair-timeout', { fair: true, timeoutMs: 300 })
  const err = await waiter.acquire().catch((e) => e)
  assert.equal(err.code, 'ERR_LOCK_TIMEOUT')
  assert.equal(await inLine('fair-timeout'), 0)
  await holder.release()
})

test('fair must be a boolean', () => {
  assert.throws(() => env.client.lock('x', { fair: 'yes' }), { code: 'ERR_INVALID_ARG', name: 'TypeError' })
})

/** How many times any waiter has taken a place in any line (RPUSH). */
const linesJoined = async () => {
  const stats = await env.redis.cli('INFO', 'commandstats')
  return Number(stats.match(/cmdstat_rpush:calls=(\d+)/)?.[1] ?? 0)
}

test('queueAfterMs decides whether a default waiter takes a place in line', async () => {
  const holder = env.client.lock('queue-after')
  await holder.acquire()
  const before = await linesJoined()
  // The default (10 ms) would join the line within these 300 ms waits.
  const late = await env.client.lock('queue-after', { queueAfterMs: 600000, timeoutMs: 300 }).acquire().catch((e) => e)
  assert.equal(late.code, 'ERR_LOCK_TIMEOUT')
  assert.equal(await linesJoined(), before, 'took a place in line with 600 s to go')
  const now = await env.client.lock('queue-after', { queueAfterMs: 0, timeoutMs: 300 }).acquire().catch((e) => e)
  assert.equal(now.code, 'ERR_LOCK_TIMEOUT')
  assert.equal(await linesJoined(), before + 1, 'queueAfterMs 0 never took a place in line')
  assert.equal(await inLine('queue-after'), 0, 'the waiter that gave up left the line')
  await holder.release()
})
