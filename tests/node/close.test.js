'use strict'
// client.close(): locks still held are released and reported lost, waits in
// progress reject, the connections close, and every later operation of the
// client or its locks rejects with ClientClosedError.

const assert = require('node:assert/strict')
const { test } = require('node:test')
const { Client, ClientClosedError, LockLostError } = require('../../node/index.js')
const { serve, waitFor, aborted } = require('./helper.js')

const env = serve({ client: false })

function isClosed(err) {
  return err instanceof ClientClosedError && err.code === 'ERR_LOCK_CLIENT_CLOSED'
}

test('close() releases what is held, every re-entry, and aborts its signal', async () => {
  const client = await Client.connect(env.redis.url)
  const single = client.lock('close-single')
  await single.acquire()
  const signal = single.signal
  const nested = client.lock('close-nested')
  await nested.acquire()
  await nested.acquire()
  await client.close()
  assert.equal(await env.redis.cli('EXISTS', 'rlock:{close-single}'), '0')
  assert.equal(await env.redis.cli('EXISTS', 'rlock:{close-nested}'), '0')
  const reason = await aborted(signal)
  assert.ok(reason instanceof LockLostError)
  assert.equal(reason.reason, 'the client was closed')
  assert.equal(nested.lost, true)
  const other = await Client.connect(env.redis.url)
  assert.equal(await other.lock('close-single').tryAcquire(), true, 'free at once, not after the lease')
  await other.close()
})

test('every operation after close() rejects with ClientClosedError', async () => {
  const client = await Client.connect(env.redis.url)
  const held = client.lock('close-ops')
  await held.acquire()
  await client.close()
  const idle = client.lock('close-ops-idle')
  const calls = {
    acquire: () => idle.acquire(),
    tryAcquire: () => idle.tryAcquire(),
    release: () => idle.release(),
    extend: () => held.extend(),
    isLocked: () => idle.isLocked(),
    isOwned: () => held.isOwned(),
    using: () => client.using('close-ops-using', async () => 'ran'),
  }
  for (const [what, call] of Object.entries(calls)) {
    await assert.rejects(call(), isClosed, `${what} after close()`)
  }
  await client.close() // again: nothing more happens
  await assert.rejects(idle.acquire(), isClosed)
})

test('close() ends a wait in progress', async () => {
  const rival = await Client.connect(env.redis.url)
  await rival.lock('close-wait').acquire()
  const client = await Client.connect(env.redis.url)
  const waiting = client.lock('close-wait').acquire()
  let settled = false
  waiting.catch(() => {}).finally(() => (settled = true))
  await waitFor(async () => (await env.redis.cli('LLEN', 'rlock:{close-wait}:queue')) === '1', {
    what: 'the waiter in line',
  })
  assert.equal(settled, false)
  const closedAt = Date.now()
  await client.close()
  await assert.rejects(waiting, isClosed)
  assert.ok(Date.now() - closedAt < 3000, `took ${Date.now() - closedAt} ms`)
  await rival.close()
})

test('close() closes the connections while the client is still referenced', async () => {
  const baseline = await env.redis.connections()
  const client = await Client.connect(env.redis.url)
  const holder = client.lock('close-conns')
  await holder.acquire()
  // A wait starts the pub/sub connection.
  await assert.rejects(client.lock('close-conns', { timeoutMs: 100 }).acquire())
  assert.equal(await env.redis.connections(), baseline + 2)
  await client.close()
  await waitFor(async () => (await env.redis.connections()) === baseline, { what: 'the connections closed' })
  assert.equal(holder.lost, true)
})
