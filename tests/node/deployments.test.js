'use strict'
// Beyond one Redis: a Redlock client over three independent masters, a Redis
// Cluster client, syncReplicas against a primary with a replica, and a private
// CA for TLS. Every server is a real redis-server started (and stopped) here.

const assert = require('node:assert/strict')
const fs = require('node:fs')
const { test, after } = require('node:test')
const { Client, LockTimeoutError, LockConnectionError } = require('../../node/index.js')
const { RedisServer, RedisCluster, waitFor } = require('./helper.js')

const key = (name) => `rlock:{${name}}`

function timedOut(pattern) {
  return (err) => {
    assert.ok(err instanceof LockTimeoutError, `${err?.name}: ${err?.message}`)
    assert.equal(err.code, 'ERR_LOCK_TIMEOUT')
    assert.match(err.message, pattern)
    return true
  }
}

// ---------------------------------------------------------------------------
// Redlock

/** Three masters and a Redlock client connected to all of them. */
async function redlock() {
  const masters = await Promise.all([0, 1, 2].map(() => RedisServer.start()))
  const client = await Client.connect(masters.map((m) => m.url))
  const heldOn = async (name) => {
    const live = masters.filter((m) => m.running)
    const seen = await Promise.all(live.map((m) => m.cli('EXISTS', key(name))))
    return seen.filter((n) => n === '1').length
  }
  const stop = async () => {
    await client.close()
    await Promise.all(masters.map((m) => m.stop()))
  }
  return { masters, client, heldOn, stop }
}

test('a Redlock client holds the lock on a majority and releases it everywhere', async () => {
  const { masters, client, heldOn, stop } = await redlock()
  try {
    const lock = client.lock('job', { timeoutMs: 5000 })
    await lock.acquire()
    const first = lock.fencingToken
    assert.equal(typeof first, 'number')
    // Acquisition resolves once a majority granted it.
    assert.ok((await heldOn('job')) >= 2)
    const rival = await Client.connect(masters.map((m) => m.url))
    assert.equal(await rival.lock('job').tryAcquire(), false)
    await lock.release()
    assert.equal(await heldOn('job'), 0)
    const again = rival.lock('job')
    assert.equal(await again.tryAcquire(), true)
    assert.ok(again.fencingToken > first, `${again.fencingToken} after ${first}`)
    await rival.close()
  } finally {
    await stop()
  }
})

test('a Redlock client with one master of three down still locks', async () => {
  const { masters, client, heldOn, stop } = await redlock()
  try {
    await masters[2].stop()
    const lock = client.lock('one-down', { timeoutMs: 5000 })
    await lock.acquire()
    assert.equal(await heldOn('one-down'), 2)
    assert.equal(await client.lock('one-down').tryAcquire(), false)
    await lock.release()
    assert.equal(await heldOn('one-down'), 0)
  } finally {
    await stop()
  }
})

test('a Redlock client with two masters of three down rejects ERR_LOCK_TIMEOUT naming the quorum', async () => {
  const { masters, client, heldOn, stop } = await redlock()
  try {
    await masters[1].stop()
    await masters[2].stop()
    await assert.rejects(client.lock('two-down', { timeoutMs: 500 }).acquire(), timedOut(/quorum/))
    assert.equal(await client.lock('two-down').tryAcquire(), false)
    assert.equal(await heldOn('two-down'), 0, 'the one grant it got was given back')
  } finally {
    await stop()
  }
})

test('a Redlock client refuses read-write locks and semaphores: their holders live in one Redis', async () => {
  const { client, stop } = await redlock()
  try {
    const refused = { name: 'TypeError', code: 'ERR_INVALID_ARG', message: /Redlock/ }
    assert.throws(() => client.rwLock('shared'), refused)
    assert.throws(() => client.semaphore('shared', { permits: 2 }), refused)
  } finally {
    await stop()
  }
})

// ---------------------------------------------------------------------------
// Redis Cluster (one cluster for the file: it costs seconds to build; started
// by the first test that asks, so that a run leaving these tests out, as
// `make test-matrix` does on Redis 6.2, starts none)

let started
const sharedCluster = () => (started ??= RedisCluster.start(3))
after(async () => {
  await (await started?.catch(() => undefined))?.stop()
})

test('a Cluster client locks names on every master', async () => {
  const cluster = await sharedCluster()
  const client = await Client.connect(cluster.urls, { cluster: true })
  try {
    const masters = new Set()
    for (let i = 0; i < 30; i++) {
      const name = `item:${i}`
      const node = await cluster.masterOf(key(name))
      masters.add(node.port)
      const lock = client.lock(name)
      assert.equal(await lock.tryAcquire(), true)
      assert.ok(lock.fencingToken >= 1, `token ${lock.fencingToken}`)
      assert.equal(await node.cli('EXISTS', key(name)), '1')
      await lock.release()
      assert.equal(await node.cli('EXISTS', key(name)), '0')
    }
    assert.equal(masters.size, 3, 'the names spread over every master')
  } finally {
    await client.close()
  }
})

test('a Cluster client shares read-write locks and semaphores on every master', async () => {
  const cluster = await sharedCluster()
  const client = await Client.connect(cluster.urls, { cluster: true })
  try {
    const masters = new Set()
    for (let i = 0; i < 12; i++) {
      const name = `shared:${i}`
      masters.add((await cluster.masterOf(`rlock:{${name}}:rwlock`)).port)
      const [reader, other] = [client.rwLock(name), client.rwLock(name)]
      assert.equal(await reader.read.tryAcquire(), true)
      assert.equal(await other.read.tryAcquire(), true)
      assert.equal(await client.rwLock(name).write.tryAcquire(), false)
      await reader.read.release()
      await other.read.release()
      const sem = client.semaphore(name, { permits: 2 })
      assert.equal(await sem.tryAcquire({ permits: 2 }), true)
      assert.equal(await client.semaphore(name, { permits: 2 }).tryAcquire(), false)
      assert.equal(await sem.available(), 0)
      await sem.release()
    }
    assert.equal(masters.size, 3, 'the names spread over every master')
  } finally {
    await client.close()
  }
})

test('a Cluster waiter is woken by the sharded release message', async () => {
  const cluster = await sharedCluster()
  const holderClient = await Client.connect(cluster.urls, { cluster: true })
  const waiterClient = await Client.connect(cluster.urls, { cluster: true })
  try {
    const holder = holderClient.lock('hot', { ttlMs: 30000 })
    await holder.acquire()
    const waiting = waiterClient.lock('hot', { timeoutMs: 20000 }).acquire()
    const node = await cluster.masterOf(key('hot'))
    const channel = `${key('hot')}:released`
    await waitFor(async () => (await node.cli('PUBSUB', 'SHARDNUMSUB', channel)).endsWith('\n1'), {
      what: "the waiter's SSUBSCRIBE on the slot's node",
    })
    const released = Date.now()
    await holder.release()
    await waiting
    // The holder's lease had ~30 s left: only the message explains this.
    assert.ok(Date.now() - released < 5000, `${Date.now() - released} ms`)
  } finally {
    await holderClient.close()
    await waiterClient.close()
  }
})

// ---------------------------------------------------------------------------
// syncReplicas

test('syncReplicas acquires what a replica has, and without the replica rejects ERR_LOCK_TIMEOUT', async () => {
  // Diskless sync starts after a 5 s delay by default (waiting for more
  // replicas to share one transfer); there is only one here.
  const primary = await RedisServer.start('--repl-diskless-sync-delay', '0')
  const replica = await RedisServer.start('--replicaof', '127.0.0.1', String(primary.port))
  const client = await Client.connect(primary.url)
  try {
    await waitFor(async () => (await replica.cli('INFO', 'replication')).includes('master_link_status:up'), {
      timeoutMs: 20000,
      what: 'the replica in sync',
    })
    const lock = client.lock('replicated', { ttlMs: 2000, syncReplicas: 1, timeoutMs: 5000 })
    await lock.acquire()
    // WAIT returned only once the replica acknowledged the write.
    assert.equal(await replica.cli('EXISTS', key('replicated')), '1')
    await lock.release()

    await replica.stop()
    const alone = client.lock('alone', { ttlMs: 2000, syncReplicas: 1, timeoutMs: 1000 })
    await assert.rejects(alone.acquire(), timedOut(/replicas/))
    assert.equal(alone.fencingToken, null)
    assert.equal(await primary.cli('EXISTS', key('alone')), '0', 'the unreplicated grant was undone')
  } finally {
    await client.close()
    await replica.stop()
    await primary.stop()
  }
})

// ---------------------------------------------------------------------------
// TLS with a private CA

test('tlsCa trusts a private CA given as PEM text or bytes; without it the connection is refused', async () => {
  const server = await RedisServer.startTls()
  try {
    const pem = fs.readFileSync(server.caFile)
    for (const tlsCa of [pem.toString('utf8'), pem, new Uint8Array(pem)]) {
      const client = await Client.connect(server.url, { tlsCa })
      await client.using('over-tls', async () => {
        assert.equal(await server.cli('EXISTS', key('over-tls')), '1')
      })
      await client.close()
    }
    await assert.rejects(
      Client.connect(server.url),
      (err) => err instanceof LockConnectionError && err.code === 'ERR_LOCK_CONNECTION',
    )
  } finally {
    await server.stop()
  }
})
