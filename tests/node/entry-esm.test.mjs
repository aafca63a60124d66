// The ESM entry point: import from 'redis-rlock' gives the same classes as require().

import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import { test } from 'node:test'
import rlockDefault, {
  Client,
  Lock,
  RwLock,
  Semaphore,
  LockError,
  LockTimeoutError,
  LockNotOwnedError,
  LockLostError,
  LockConnectionError,
  LockUpgradeError,
} from 'redis-rlock'

const require = createRequire(import.meta.url)
const { RedisServer } = require('./helper.js')

test('import from "redis-rlock" gives named exports, a default export, and the very classes require() gives', async () => {
  const cjs = require('redis-rlock')
  assert.equal(Client, cjs.Client)
  assert.equal(Lock, cjs.Lock)
  assert.equal(LockError, cjs.LockError)
  assert.equal(LockTimeoutError, cjs.LockTimeoutError)
  assert.equal(LockNotOwnedError, cjs.LockNotOwnedError)
  assert.equal(LockLostError, cjs.LockLostError)
  assert.equal(LockConnectionError, cjs.LockConnectionError)
  assert.equal(RwLock, cjs.RwLock)
  assert.equal(Semaphore, cjs.Semaphore)
  assert.equal(LockUpgradeError, cjs.LockUpgradeError)
  assert.equal(typeof RwLock, 'function')
  assert.equal(rlockDefault, cjs)

  const redis = await RedisServer.start()
  try {
    const client = await Client.connect(redis.url)
    const holder = client.lock('esm')
    await holder.acquire()
    const err = await client.lock('esm', { timeoutMs: 0 }).acquire().catch((e) => e)
    assert.ok(err instanceof LockTimeoutError)
    assert.ok(err instanceof cjs.LockTimeoutError, 'one module instance: instanceof agrees')
    await holder.release()
    await client.close()
  } finally {
    await redis.stop()
  }
})
