'use strict'
// Errors: bad input throws TypeError/RangeError with ERR_INVALID_ARG before
// any I/O; Redis failures are ERR_LOCK_CONNECTION; no password ever shows.

const assert = require('node:assert/strict')
const { test, before, after } = require('node:test')
const { Client, LockConnectionError, LockError } = require('../../node/index.js')
const { RedisServer, freePort, waitFor } = require('./helper.js')

let redis
let client
before(async () => {
  redis = await RedisServer.start()
  client = await Client.connect(redis.url)
})
after(async () => {
  await client.close()
  await redis.stop()
})

function invalid(ErrorClass) {
  return (err) => {
    assert.ok(err instanceof ErrorClass, `${err?.name}: ${err?.message}`)
    assert.equal(err.code, 'ERR_INVALID_ARG')
    return true
  }
}

test('bad lock names and options throw at client.lock(), synchronously, before any I/O', async () => {
  // Every command Redis ran but the INFO used to ask.
  const commands = async () =>
    (await redis.cli('INFO', 'commandstats'))
      .split(/\r?\n/)
      .filter((line) => line.startsWith('cmdstat_') && !line.startsWith('cmdstat_info:'))
      .join('\n')
  const before = await commands()
  for (const name of ['', '}starts-with-brace']) {
    assert.throws(() => client.lock(name), invalid(TypeError), JSON.stringify(name))
  }
  for (const name of [undefined, null, 42, {}, Symbol('x')]) {
    assert.throws(() => client.lock(name), invalid(TypeError), String(name))
  }
  for (const ttlMs of [0, -1, NaN, Infinity, -Infinity, 1e15]) {
    assert.throws(() => client.lock('x', { ttlMs }), invalid(RangeError), String(ttlMs))
  }
  for (const ttlMs of ['1000', null, true, 10n]) {
    assert.throws(() => client.lock('x', { ttlMs }), invalid(TypeError), String(ttlMs))
  }
  assert.throws(() => client.lock('x', { timeoutMs: -1 }), invalid(RangeError))
  assert.throws(() => client.lock('x', { timeoutMs: NaN }), invalid(RangeError))
  assert.throws(() => client.lock('x', { timeoutMs: Infinity }), invalid(RangeError))
  assert.throws(() => client.lock('x', { maxHoldMs: 0 }), invalid(RangeError))
  assert.throws(() => client.lock('x', { autoRenew: 'yes' }), invalid(TypeError))
  assert.throws(() => client.lock('x', 5), invalid(TypeError))
  // The argument is named as the caller wrote it.
  assert.throws(() => client.lock('x', { ttlMs: 0 }), /ttlMs/)
  assert.throws(() => client.lock('x', { maxHoldMs: -5 }), /maxHoldMs/)
  assert.throws(() => client.lock('x', { timeoutMs: -5 }), /timeoutMs/)
  assert.equal(await commands(), before, 'no command reached Redis')
})

test('bad arguments of the async methods reject with ERR_INVALID_ARG', async () => {
  const lock = client.lock('bad-args')
  await assert.rejects(lock.extend(0), invalid(RangeError))
  await assert.rejects(lock.extend(NaN), invalid(RangeError))
  await assert.rejects(lock.extend('1000'), invalid(TypeError))
  await assert.rejects(lock.acquire({ signal: 'no' }), invalid(TypeError))
  await assert.rejects(lock.acquire(5), invalid(TypeError))
  await assert.rejects(client.using('x', { ttlMs: 1000 }), invalid(TypeError))
  await assert.rejects(client.using('', () => 1), invalid(TypeError))
  assert.equal(await lock.isLocked(), false)
})

test('bad URLs and prefixes reject Client.connect() with ERR_INVALID_ARG', async () => {
  for (const url of ['not a url', 'http://127.0.0.1:6379', 'redis://', 'redis://127.0.0.1:1/notadb']) {
    await assert.rejects(Client.connect(url), invalid(TypeError), url)
  }
  await assert.rejects(Client.connect(6379), invalid(TypeError))
  await assert.rejects(Client.connect(redis.url, { prefix: 'has space' }), invalid(TypeError))
  await assert.rejects(Client.connect(redis.url, { prefix: '{x}' }), invalid(TypeError))
  await assert.rejects(Client.connect(redis.url, { prefix: 7 }), invalid(TypeError))
  // A malformed URL with a password never echoes it.
  const err = await Client.connect('http://user:hunter2@127.0.0.1:1').catch((e) => e)
  assert.equal(err.code, 'ERR_INVALID_ARG')
  assert.doesNotMatch(`${err.message} ${err.stack}`, /hunter2/)
})

test('bad URL lists and deployment options reject Client.connect() with ERR_INVALID_ARG', async () => {
  await assert.rejects(Client.connect([]), invalid(TypeError))
  await assert.rejects(Client.connect([redis.url, 6379]), invalid(TypeError))
  await assert.rejects(Client.connect([redis.url, 'redis://127.0.0.1:1/notadb']), invalid(TypeError))
  await assert.rejects(Client.connect({ url: redis.url }), invalid(TypeError))
  await assert.rejects(Client.connect(redis.url, { cluster: 'yes' }), invalid(TypeError))
  await assert.rejects(Client.connect(redis.url, { tlsCa: 42 }), invalid(TypeError))
  // A CA is for TLS: refused for a redis:// URL rather than ignored.
  await assert.rejects(Client.connect(redis.url, { tlsCa: 'PEM' }), invalid(TypeError))
})

test('bad syncReplicas throws at client.lock() with ERR_INVALID_ARG', () => {
  for (const syncReplicas of [0, -1, 1.5, 101, NaN, Infinity]) {
    assert.throws(() => client.lock('x', { syncReplicas }), invalid(RangeError), String(syncReplicas))
  }
  for (const syncReplicas of ['1', true, null]) {
    assert.throws(() => client.lock('x', { syncReplicas }), invalid(TypeError), String(syncReplicas))
  }
  assert.throws(() => client.lock('x', { syncReplicas: 0 }), /syncReplicas/)
  assert.ok(client.lock('x', { syncReplicas: 2 }))
})

test('an unreachable Redis rejects ERR_LOCK_CONNECTION without showing the password', async () => {
  const port = await freePort() // nothing listens there
  const err = await Client.connect(`redis://user:hunter2@127.0.0.1:${port}`).catch((e) => e)
  assert.ok(err instanceof LockConnectionError, String(err))
  assert.ok(err instanceof LockError)
  assert.equal(err.code, 'ERR_LOCK_CONNECTION')
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
