'use strict'
// Owners: a `using()` scope owns its lock, and what its callback does, in
// the same async flow, nests in it (as a thread or asyncio task does in
// Python); every other flow waits. Outside any scope the owner is the Lock
// handle.

const assert = require('node:assert/strict')
const { test } = require('node:test')
const { Client, LockTimeoutError } = require('../../node/index.js')
const { serve } = require('./helper.js')

const env = serve()
const key = (name) => `rlock:{${name}}`

test('a using() nested in a using() of the same name re-enters: same token, released by each in turn', async () => {
  const value = await env.client.using('nest', { timeoutMs: 1000 }, async (outerSignal, outer) => {
    const token = outer.fencingToken
    const inner = await env.client.using('nest', { timeoutMs: 1000 }, async (signal, lock) => {
      assert.equal(lock.fencingToken, token, 'the same holding, not a new one')
      return 'inner'
    })
    assert.equal(inner, 'inner')
    assert.equal(await outer.isOwned(), true, 'the inner release leaves the outer holding')
    assert.equal(await env.redis.cli('EXISTS', key('nest')), '1')
    return 'outer'
  })
  assert.equal(value, 'outer')
  assert.equal(await env.redis.cli('EXISTS', key('nest')), '0', 'the outer release frees it')
})

test('client.lock().acquire() inside a using() of the same name re-enters: count 2, one release each', async () => {
  await env.client.using('nest-handle', async (signal, outer) => {
    // One attempt only: waiting on itself would fail at once.
    const inner = env.client.lock('nest-handle', { timeoutMs: 0 })
    await inner.acquire()
    assert.equal(inner.fencingToken, outer.fencingToken)
    await inner.release()
    assert.equal(await outer.isOwned(), true, 'one release of two leaves it held')
    // The same flow, several awaits deeper, is still the scope.
    await new Promise((resolve) => setTimeout(resolve, 1))
    assert.equal(await env.client.lock('nest-handle', { timeoutMs: 0 }).tryAcquire(), true)
    await env.client.lock('nest-handle').release()
  })
  assert.equal(await env.redis.cli('EXISTS', key('nest-handle')), '0')
})

/** Runs `using(name)` calls side by side; resolves with the most that ran at once. */
async function sideBySide(name, count) {
  let inside = 0
  let most = 0
  const critical = async (signal, lock) => {
    inside += 1
    most = Math.max(most, inside)
    // Round trips to Redis: time for any other flow to get in if it could.
    for (let i = 0; i < 3; i++) assert.equal(await lock.isOwned(), true)
    inside -= 1
  }
  await Promise.all(Array.from({ length: count }, () => env.client.using(name, { timeoutMs: 5000 }, critical)))
  return most
}

test('using() calls started side by side by Promise.all exclude each other', async () => {
  assert.equal(await sideBySide('apart', 3), 1)
  assert.equal(await env.redis.cli('EXISTS', key('apart')), '0')
})

test('inside a using() of another name, flows side by side still exclude each other', async () => {
  const most = await env.client.using('outer-name', () => sideBySide('apart-inner', 3))
  assert.equal(most, 1)
})

test('a flow the scope started but did not wait for is outside it once using() returned', async () => {
  let proceed
  const later = new Promise((resolve) => (proceed = resolve))
  let kept
  let leftRunning
  await env.client.using('scope-ended', async () => {
    kept = env.client.lock('scope-ended', { timeoutMs: 0 })
    await kept.acquire() // nests in the scope
    leftRunning = later.then(() => env.client.lock('scope-ended', { timeoutMs: 0 }).acquire())
  })
  assert.equal(await kept.isOwned(), true, 'the nested acquisition outlives the scope')
  proceed()
  await assert.rejects(leftRunning, LockTimeoutError, 'a flow outside the scope waits for it')
  await kept.release()
  assert.equal(await env.redis.cli('EXISTS', key('scope-ended')), '0')
})

test('another client is another owner, even from inside a scope', async () => {
  const other = await Client.connect(env.redis.url)
  try {
    await env.client.using('two-clients', async () => {
      await assert.rejects(other.lock('two-clients', { timeoutMs: 0 }).acquire(), LockTimeoutError)
      await assert.rejects(other.using('two-clients', { timeoutMs: 0 }, () => 1), LockTimeoutError)
    })
  } finally {
    await other.close()
  }
})

test('outside any using(), the owner is the Lock handle: its own acquisitions nest, other handles wait', async () => {
  const lock = env.client.lock('by-handle')
  await lock.acquire()
  await lock.acquire()
  await assert.rejects(env.client.lock('by-handle', { timeoutMs: 0 }).acquire(), LockTimeoutError)
  // Nor does a using() of that name in the same flow join it: no scope holds it.
  await assert.rejects(env.client.using('by-handle', { timeoutMs: 0 }, () => 1), LockTimeoutError)
  await lock.release()
  await lock.release()
  assert.equal(await env.redis.cli('EXISTS', key('by-handle')), '0')
})
