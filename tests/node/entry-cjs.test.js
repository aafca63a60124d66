'use strict'
// The CommonJS entry point: require('redis-rlock') gives the whole face.

const assert = require('node:assert/strict')
const { test } = require('node:test')
const { RedisServer } = require('./helper.js')

test('require("redis-rlock") exports the Client, the Lock and every error class, and locks work', async () => {
  const rlock = require('redis-rlock')
  assert.equal(require.resolve('redis-rlock'), require.resolve('../../node/index.js'))
  for (const name of [
    'Client',
    'Lock',
    'LockError',
    'LockTimeoutError',
    'LockNotOwnedError',
    'LockLostError',
    'LockConnectionError',
  ]) {
    assert.equal(typeof rlock[name], 'function', name)
  }
  assert.ok(new rlock.LockTimeoutError('x') instanceof Error)
  assert.equal(new rlock.LockNotOwnedError('x').code, 'ERR_LOCK_NOT_OWNED')
  assert.throws(() => new rlock.Client(), TypeError, 'Client.connect() is the way in')

  const redis = await RedisServer.start()
  try {
    const client = await rlock.Client.connect(redis.url)
    const lock = client.lock('cjs')
    await lock.acquire()
    assert.equal(await lock.isOwned(), true)
    await lock.release()
    await client.close()
  } finally {
    await redis.stop()
  }
})
