'use strict'
// Client.fromIoredis(): the servers an application's ioredis instance is set
// up for (host, port, db, credentials, TLS, Sentinel, Cluster), reached with
// connections of the client's own. Every server is a real redis-server.

const assert = require('node:assert/strict')
const fs = require('node:fs')
const { test } = require('node:test')
const Redis = require('ioredis')
const { Client, LockConnectionError } = require('../../node/index.js')
const { RedisServer, RedisCluster, RedisSentinel, freePort } = require('./helper.js')

const key = (name) => `rlock:{${name}}`

function invalid(pattern) {
  return (err) => {
    assert.ok(err instanceof TypeError, `${err?.name}: ${err?.message}`)
    assert.equal(err.code, 'ERR_INVALID_ARG')
    assert.match(err.message, pattern)
    return true
  }
}

test('an ioredis instance with a password and a db: the lock lives in that db', async () => {
  const password = 'p@ss w/rd:%'
  const server = await RedisServer.start('--requirepass', password)
  // Never connected: fromIoredis reads its settings and opens its own connections.
  const redis = new Redis({ host: '127.0.0.1', port: server.port, password, db: 3, lazyConnect: true })
  try {
    const client = await Client.fromIoredis(redis)
    await client.using('reused', async () => {
      assert.equal(await server.cli('-n', '3', 'EXISTS', key('reused')), '1')
      assert.equal(await server.cli('-n', '0', 'EXISTS', key('reused')), '0')
    })
    await client.close()
    assert.equal(redis.status, 'wait', 'the ioredis instance itself never connected')
  } finally {
    redis.disconnect()
    await server.stop()
  }
})

test('a connected ioredis instance made from a URL keeps working after the client it gave closes', async () => {
  const server = await RedisServer.start('--requirepass', 'secret')
  const redis = new Redis(`redis://:secret@127.0.0.1:${server.port}/2`)
  try {
    const client = await Client.fromIoredis(redis, { prefix: 'app' })
    const lock = client.lock('from-url')
    await lock.acquire()
    assert.equal(await redis.exists('app:{from-url}'), 1, 'the same db, seen through ioredis')
    await lock.release()
    await client.close()
    assert.equal(await redis.ping(), 'PONG')
  } finally {
    redis.disconnect()
    await server.stop()
  }
})

test("an ioredis username (an ACL user) is the client's user", async () => {
  const server = await RedisServer.start('--user', 'alice', 'on', '>s3cret', '~*', '&*', '+@all')
  const redis = new Redis({ host: '127.0.0.1', port: server.port, username: 'alice', password: 's3cret', lazyConnect: true })
  try {
    const client = await Client.fromIoredis(redis)
    const lock = client.lock('acl')
    await lock.acquire()
    assert.match(await server.cli('CLIENT', 'LIST'), /user=alice/)
    await lock.release()
    await client.close()
  } finally {
    redis.disconnect()
    await server.stop()
  }
})

test("ioredis' tls options: rediss with the instance's CA", async () => {
  const server = await RedisServer.startTls()
  const ca = fs.readFileSync(server.caFile)
  const redis = new Redis({ host: '127.0.0.1', port: server.port, tls: { ca }, lazyConnect: true })
  try {
    const client = await Client.fromIoredis(redis)
    await client.using('tls', async () => assert.equal(await server.cli('EXISTS', key('tls')), '1'))
    await client.close()
  } finally {
    redis.disconnect()
    await server.stop()
  }
})

test("a Sentinel ioredis instance: its sentinels and master name, with the master's password and db", async () => {
  const primary = await RedisServer.start('--requirepass', 'masterpw')
  const sentinel = await RedisSentinel.start(primary, 'rlockmaster')
  const redis = new Redis({
    sentinels: [{ host: '127.0.0.1', port: sentinel.port }],
    name: 'rlockmaster',
    password: 'masterpw',
    db: 1,
    lazyConnect: true,
  })
  try {
    const client = await Client.fromIoredis(redis)
    await client.using('sentinel', async () => {
      assert.equal(await primary.cli('-n', '1', 'EXISTS', key('sentinel')), '1')
    })
    await client.close()
  } finally {
    redis.disconnect()
    await sentinel.stop()
    await primary.stop()
  }
})

test("what the Sentinel URL cannot carry is refused, not dropped: the Sentinels' own password", async () => {
  const redis = new Redis({
    sentinels: [{ host: '127.0.0.1', port: 26379 }],
    name: 'rlockmaster',
    sentinelPassword: 'sentinel-secret',
    lazyConnect: true,
  })
  try {
    const err = await Client.fromIoredis(redis).catch((e) => e)
    invalid(/Sentinel/)(err)
    assert.doesNotMatch(`${err.message} ${err.stack}`, /sentinel-secret/)
  } finally {
    redis.disconnect()
  }
})

test('a Redis.Cluster instance: its startup nodes, in any form ioredis takes, are the seeds of a Cluster client', async () => {
  const cluster = await RedisCluster.start(3)
  const [a, b, c] = cluster.nodes
  const redis = new Redis.Cluster([{ host: '127.0.0.1', port: a.port }, `127.0.0.1:${b.port}`, c.port], {
    lazyConnect: true,
  })
  try {
    const client = await Client.fromIoredis(redis)
    // Names on every master: only a Cluster client follows MOVED to each.
    const masters = new Set()
    for (let i = 0; masters.size < 3 && i < 200; i++) {
      const name = `seeded-${i}`
      const node = await cluster.masterOf(key(name))
      masters.add(node.port)
      const lock = client.lock(name)
      assert.equal(await lock.tryAcquire(), true)
      assert.equal(await node.cli('EXISTS', key(name)), '1')
      await lock.release()
    }
    assert.equal(masters.size, 3)
    await client.close()
  } finally {
    redis.disconnect()
    await cluster.stop()
  }
})

test('fromIoredis() connects like connect(): an unreachable server names its address, not the password', async () => {
  const port = await freePort()
  const redis = new Redis({ host: '127.0.0.1', port, password: 'hunter2', lazyConnect: true })
  const err = await Client.fromIoredis(redis).catch((e) => e)
  assert.ok(err instanceof LockConnectionError, String(err))
  assert.match(err.message, new RegExp(`127\\.0\\.0\\.1:${port}\\b`))
  assert.doesNotMatch(`${err.message} ${err.stack}`, /hunter2/)
  redis.disconnect()
})

test('anything but an ioredis instance is a TypeError naming what is accepted', async () => {
  const accepted = /an ioredis Redis or Redis\.Cluster instance/
  for (const notIoredis of ['redis://127.0.0.1:6379', 6379, null, undefined, {}, { options: {} }, new Map()]) {
    await assert.rejects(Client.fromIoredis(notIoredis), invalid(accepted), String(notIoredis))
  }
  const unix = new Redis({ path: '/tmp/redis.sock', lazyConnect: true })
  await assert.rejects(Client.fromIoredis(unix), invalid(/Unix socket/))
  unix.disconnect()
  const redis = new Redis({ lazyConnect: true })
  await assert.rejects(Client.fromIoredis(redis, { cluster: true }), invalid(/unknown option `cluster`/))
  redis.disconnect()
})
