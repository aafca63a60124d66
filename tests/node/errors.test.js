'use strict'
// Errors: bad deployment options throw TypeError/RangeError with
// ERR_INVALID_ARG before any I/O (every other bad argument is in
// validation.test.js); Redis failures are ERR_LOCK_CONNECTION; no password
// ever shows.

const assert = require('node:assert/strict')
const { test } = require('node:test')
const { Client, LockConnectionError, LockError, LockTimeoutError } = require('../../node/index.js')
const { RedisServer, serve, freePort, waitFor } = require('./helper.js')

const env = serve()

function invalid(ErrorClass) {
  return (err) => {
    assert.ok(err instanceof ErrorClass, `${err?.name}: ${err?.message}`)
    assert.equal(err.code, 'ERR_INVALID_ARG')
    return true
  }
}

test('bad URL lists and deployment options reject Client.connect() with ERR_INVALID_ARG', async () => {
  await assert.rejects(Client.connect([]), invalid(TypeError))
  await assert.rejects(Client.connect([env.redis.url, 6379]), invalid(TypeError))
  await assert.rejects(Client.connect([env.redis.url, 'redis://127.0.0.1:1/notadb']), invalid(TypeError))
  await assert.rejects(Client.connect({ url: env.redis.url }), invalid(TypeError))
  await assert.rejects(Client.connect(env.redis.url, { cluster: 'yes' }), invalid(TypeError))
  await assert.rejects(Client.connect(env.redis.url, { tlsCa: 42 }), invalid(TypeError))
  // A CA is for TLS: refused for a redis:// URL rather than ignored.
  await assert.rejects(Client.connect(env.redis.url, { tlsCa: 'PEM' }), invalid(TypeError))
})

test('bad syncReplicas throws at client.lock() with ERR_INVALID_ARG', () => {
  for (const syncReplicas of [0, -1, 1.5, 101, NaN, Infinity]) {
    assert.throws(() => env.client.lock('x', { syncReplicas }), invalid(RangeError), String(syncReplicas))
  }
  for (const syncReplicas of ['1', true, null]) {
    assert.throws(() => env.client.lock('x', { syncReplicas }), invalid(TypeError), String(syncReplicas))
  }
  assert.throws(() => env.client.lock('x', { syncReplicas: 0 }), /syncReplicas/)
  assert.ok(env.client.lock('x', { syncReplicas: 2 }))
})

test('an unreachable Redis rejects ERR_LOCK_CONNECTION without showing the password', async () => {
  const port = await freePort() // nothing listens there
  const err = await Client.connect(`redis://user:hunter2@127.0.0.1:${port}`).catch((e) => e)
  assert.ok(err instanceof LockConnectionError, String(err))
  assert.ok(err instanceof LockError)
  assert.equal(err.code, 'ERR_LOCK_CONNECTION')
  assert.doesNotMatch(`${err.message} ${err.stack}`, /hunter2/)
})

test('a connection error names the server it could not reach, never its password', async () => {
  const port = await freePort() // nothing listens there
  const err = await Client.connect(`redis://:hunter2@127.0.0.1:${port}`).catch((e) => e)
  assert.ok(err instanceof LockConnectionError, String(err))
  assert.match(err.message, new RegExp(`127\\.0\\.0\\.1:${port}\\b`))
  assert.doesNotMatch(`${err.message} ${err.stack}`, /hunter2/)
})

test('a refused password rejects ERR_LOCK_CONNECTION without showing it', async () => {
  const secured = await RedisServer.start('--requirepass', 'right-password')
  try {
    for (const password of ['hunter2', 'p%40ss']) {
      const err = await Client.connect(`redis://:${password}@127.0.0.1:${secured.port}`).catch((e) => e)
      assert.ok(err instanceof LockConnectionError, String(err))
      assert.doesNotMatch(`${err.message} ${err.stack}`, new RegExp(password))
      assert.doesNotMatch(`${err.message} ${err.stack}`, /p@ss/)
    }
    // The right password works, and the prefix option is used.
    const ok = await Client.connect(`redis://:right-password@127.0.0.1:${secured.port}`, { prefix: 'app' })
    const lock = ok.lock('auth')
    await lock.acquire()
    assert.equal(await secured.cli('EXISTS', 'app:{auth}'), '1')
    await lock.release()
    await ok.close()
  } finally {
    await secured.stop()
  }
})

test('Redis going away under a connected client rejects lock operations with ERR_LOCK_CONNECTION', async () => {
  const doomed = await RedisServer.start()
  const c = await Client.connect(doomed.url)
  await doomed.stop()
  const err = await waitFor(() => c.lock('gone').tryAcquire().then(() => null, (e) => e), {
    timeoutMs: 10000,
    what: 'an error from the stopped server',
  })
  assert.ok(err instanceof LockConnectionError, String(err))
  assert.equal(err.code, 'ERR_LOCK_CONNECTION')
  await c.close()
})

test('an infinite number is spelled as JavaScript spells it in a message', () => {
  for (const [options, shown] of [
    [{ ttlMs: Infinity }, 'ttlMs must be a finite number above 0, got Infinity'],
    [{ ttlMs: -Infinity }, 'ttlMs must be a finite number above 0, got -Infinity'],
    [{ timeoutMs: Infinity }, 'timeoutMs must be finite (leave it unset to wait forever), got Infinity'],
  ]) {
    assert.throws(() => env.client.lock('x', options), (err) => {
      assert.equal(err.message, shown)
      assert.doesNotMatch(err.message, /\binf\b/)
      return true
    })
  }
})

test('a single attempt that finds the lock held says so, not that a deadline passed', async () => {
  const name = `busy-${process.pid}-${Date.now()}`
  const other = await Client.connect(env.redis.url)
  const held = other.lock(name)
  await held.acquire()
  try {
    const err = await env.client.lock(name, { timeoutMs: 0 }).acquire().catch((e) => e)
    assert.ok(err instanceof LockTimeoutError, String(err))
    assert.equal(err.code, 'ERR_LOCK_TIMEOUT')
    assert.equal(err.message, `lock "${name}" is held by someone else`)
    const waited = await env.client.lock(name, { timeoutMs: 50 }).acquire().catch((e) => e)
    assert.match(waited.message, /was not acquired before the deadline/)
  } finally {
    await held.release()
    await other.close()
  }
})

test('a refused connection is told in milliseconds, not after reconnection back-offs', async () => {
  const took = []
  for (let i = 0; i < 5; i++) {
    const start = performance.now()
    const err = await Client.connect(`redis://127.0.0.1:${await freePort()}`).catch((e) => e)
    took.push(performance.now() - start)
    assert.ok(err instanceof LockConnectionError, String(err))
  }
  assert.ok(Math.min(...took) < 100, `took ${took.map((t) => t.toFixed(1)).join(', ')} ms`)
})
