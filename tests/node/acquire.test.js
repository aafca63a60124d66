'use strict'
// Taking and giving back: acquire/release, one attempt, deadlines, fencing,
// re-entry, owners, extend and `await using`.

const assert = require('node:assert/strict')
const { test } = require('node:test')
const { LockTimeoutError, LockNotOwnedError } = require('../../node/index.js')
const { serve } = require('./helper.js')

const env = serve()

test('acquire() takes the lock in Redis and release() frees it', async () => {
  const lock = env.client.lock('basic')
  assert.equal(lock.name, 'basic')
  assert.equal(await lock.isLocked(), false)
  assert.equal(await lock.acquire(), undefined)
  assert.equal(await lock.isLocked(), true)
  assert.equal(await lock.isOwned(), true)
  assert.equal(await env.redis.cli('EXISTS', 'rlock:{basic}'), '1')
  assert.equal(await lock.release(), undefined)
  assert.equal(await lock.isLocked(), false)
  assert.equal(await lock.isOwned(), false)
  assert.equal(await env.redis.cli('EXISTS', 'rlock:{basic}'), '0')
})

test('tryAcquire() is false while another handle holds the lock, true once it is free', async () => {
  const holder = env.client.lock('try')
  const other = env.client.lock('try')
  assert.equal(await holder.tryAcquire(), true)
  assert.equal(await other.tryAcquire(), false)
  assert.equal(await other.isOwned(), false)
  await holder.release()
  assert.equal(await other.tryAcquire(), true)
  await other.release()
})

test('timeoutMs bounds the wait: acquire() rejects ERR_LOCK_TIMEOUT after about timeoutMs', async () => {
  const holder = env.client.lock('deadline')
  await holder.acquire()
  const waiter = env.client.lock('deadline', { timeoutMs: 300 })
  const start = Date.now()
  const err = await waiter.acquire().catch((e) => e)
  const waited = Date.now() - start
  assert.ok(err instanceof LockTimeoutError, String(err))
  assert.equal(err.code, 'ERR_LOCK_TIMEOUT')
  assert.ok(waited >= 280 && waited < 2000, `waited ${waited} ms`)
  await holder.release()
})

test('timeoutMs: 0 makes exactly one attempt', async () => {
  const holder = env.client.lock('once')
  await holder.acquire()
  const start = Date.now()
  const err = await env.client.lock('once', { timeoutMs: 0 }).acquire().catch((e) => e)
  assert.equal(err.code, 'ERR_LOCK_TIMEOUT')
  assert.ok(Date.now() - start < 250, `took ${Date.now() - start} ms`)
  await holder.release()
  await env.client.lock('once', { timeoutMs: 0 }).acquire()
})

test('fencing tokens strictly increase with every fresh acquisition, and are null when not held', async () => {
  const tokens = []
  for (let i = 0; i < 5; i++) {
    const lock = env.client.lock('fenced')
    assert.equal(lock.fencingToken, null)
    await lock.acquire()
    assert.equal(typeof lock.fencingToken, 'number')
    tokens.push(lock.fencingToken)
    await lock.release()
    assert.equal(lock.fencingToken, null)
  }
  for (let i = 1; i < tokens.length; i++) assert.ok(tokens[i] > tokens[i - 1], tokens.join(' '))
})

test('acquiring twice on one handle nests: it takes two releases to free the lock', async () => {
  const lock = env.client.lock('nested')
  await lock.acquire()
  const token = lock.fencingToken
  await lock.acquire()
  assert.equal(lock.fencingToken, token, 're-entry keeps the holding and its token')
  await lock.release()
  assert.equal(await lock.isOwned(), true, 'one release of two leaves it held')
  await lock.release()
  assert.equal(await lock.isLocked(), false)
  await assert.rejects(lock.release(), LockNotOwnedError)
})

test('another handle on the same name is another owner: it waits until the holder releases', async () => {
  const holder = env.client.lock('owners')
  const waiter = env.client.lock('owners', { timeoutMs: 5000 })
  await holder.acquire()
  let settled = false
  const waiting = waiter.acquire().finally(() => {
    settled = true
  })
  // Several round trips later it is still waiting.
  for (let i = 0; i < 5; i++) assert.equal(await holder.isOwned(), true)
  assert.equal(settled, false, 'the waiter got in while the lock was held')
  await holder.release()
  await waiting
  assert.equal(await waiter.isOwned(), true)
  assert.equal(await holder.isOwned(), false)
  await waiter.release()
})

test('extend(ttlMs) resets the lease of this same lock and resolves with nothing', async () => {
  const lock = env.client.lock('extended', { ttlMs: 2000, autoRenew: false })
  await lock.acquire()
  assert.ok(Number(await env.redis.cli('PTTL', 'rlock:{extended}')) <= 2000)
  assert.equal(await lock.extend(60000), undefined)
  assert.ok(Number(await env.redis.cli('PTTL', 'rlock:{extended}')) > 50000)
  await lock.extend()
  const pttl = Number(await env.redis.cli('PTTL', 'rlock:{extended}'))
  assert.ok(pttl > 0 && pttl <= 2000, `extend() without ttlMs uses the lock's ttlMs, got ${pttl}`)
  await assert.rejects(env.client.lock('extended').extend(1000), { code: 'ERR_LOCK_NOT_OWNED' })
  await lock.release()
})

test('release() of a lock this handle does not hold rejects ERR_LOCK_NOT_OWNED at once, never retried', async () => {
  const holder = env.client.lock('not-mine')
  await holder.acquire()
  const start = Date.now()
  const err = await env.client.lock('not-mine').release().catch((e) => e)
  assert.ok(err instanceof LockNotOwnedError, String(err))
  assert.equal(err.code, 'ERR_LOCK_NOT_OWNED')
  assert.equal(err.reason, 'not acquired by this owner')
  assert.ok(Date.now() - start < 250, `took ${Date.now() - start} ms`)
  assert.equal(await holder.isOwned(), true, "another owner's lock is never touched")
  await holder.release()
})

test('err.reason says why a release found the lock not held by this owner', async () => {
  const reasonOf = async (lock) => {
    const err = await lock.release().catch((e) => e)
    assert.ok(err instanceof LockNotOwnedError, String(err))
    assert.equal(err.code, 'ERR_LOCK_NOT_OWNED')
    return err.reason
  }
  const never = env.client.lock('reason-never')
  assert.equal(await reasonOf(never), 'not acquired by this owner')

  const twice = env.client.lock('reason-twice')
  await twice.acquire()
  await twice.release()
  assert.equal(await reasonOf(twice), 'already released')

  const gone = env.client.lock('reason-gone', { autoRenew: false })
  await gone.acquire()
  await env.redis.cli('DEL', 'rlock:{reason-gone}')
  assert.equal(await reasonOf(gone), 'expired')

  const taken = env.client.lock('reason-taken', { autoRenew: false })
  await taken.acquire()
  await env.redis.cli('DEL', 'rlock:{reason-taken}')
  const thief = env.client.lock('reason-taken')
  await thief.acquire()
  assert.equal(await reasonOf(taken), 'held by another owner')
  assert.equal(await thief.isOwned(), true, "another owner's lock is never touched")
  await thief.release()
})

test('Symbol.asyncDispose releases a held lock and does nothing on one not held', async () => {
  const lock = env.client.lock('disposed')
  await lock[Symbol.asyncDispose]()
  await lock.acquire()
  await lock.acquire()
  await lock[Symbol.asyncDispose]()
  assert.equal(await lock.isOwned(), true, 'one acquisition disposed of, one still held')
  await lock[Symbol.asyncDispose]()
  assert.equal(await env.redis.cli('EXISTS', 'rlock:{disposed}'), '0')
  await lock[Symbol.asyncDispose]()
})
