'use strict'
// What a client tells about itself: its events ('lost' once per lost lease,
// with the lock's name and reason; 'error' never thrown without a listener),
// its counters (stats(), prometheus()) and inspect() naming the holder's and
// waiters' host and pid.

const assert = require('node:assert/strict')
const os = require('node:os')
const { test } = require('node:test')
const { Client } = require('../../node/index.js')
const { serve, waitFor, aborted } = require('./helper.js')

const env = serve({ client: false })

async function lose(client, name) {
  const lock = client.lock(name, { ttlMs: 600 })
  await lock.acquire()
  await env.redis.cli('DEL', `rlock:{${name}}`)
  await aborted(lock.signal, 5000)
}

test("a lost lease is one 'lost' event naming the lock and its reason", async () => {
  const client = await Client.connect(env.redis.url)
  try {
    const events = []
    client.on('lost', (e) => events.push(e))
    await lose(client, 'ev:first')
    // Events come in order: once the second loss is told, the first's are in.
    await lose(client, 'ev:second')
    await waitFor(() => events.some((e) => e.name === 'ev:second'), { what: 'the second loss event' })
    const first = events.filter((e) => e.name === 'ev:first')
    assert.equal(first.length, 1, JSON.stringify(events))
    assert.equal(first[0].reason, 'expired')
    assert.equal(typeof first[0].fence, 'number')
    assert.equal(client.stats().lost.expired, 2)
  } finally {
    await client.close()
  }
})

test("someone else's data in the registration key is an 'error' to a listener, and thrown at no one", async () => {
  // Two clients hold a lock each, renewed every second; each one's
  // registration key is then overwritten with a string. The next write of
  // each registration (10 s after the last) finds it foreign: told to the
  // listener of one, and to nobody by the other, which must not throw.
  const heard = []
  const listened = await Client.connect(env.redis.url)
  const silent = await Client.connect(env.redis.url)
  listened.on('error', (e) => heard.push(e))
  try {
    for (const [client, name] of [[listened, 'fr:one'], [silent, 'fr:two']]) {
      await client.lock(name, { ttlMs: 3000 }).acquire()
      const { client_id: id } = (await client.inspect(name)).holder
      assert.equal(await env.redis.cli('SET', `rlock:client:{${id}}`, 'not yours'), 'OK')
    }
    await waitFor(() => heard.length > 0, { timeoutMs: 20000, what: "the 'error' event" })
    assert.equal(heard.length, 1, JSON.stringify(heard))
    assert.match(heard[0].message, /not this client's registration/)
    // Left alone: still the string written there.
    const { client_id: id } = (await listened.inspect('fr:one')).holder
    assert.equal(await env.redis.cli('GET', `rlock:client:{${id}}`), 'not yours')
  } finally {
    await listened.close()
    await silent.close()
  }
})

test('stats() counts cycles and contention; prometheus() is its text exposition', async () => {
  const client = await Client.connect(env.redis.url)
  try {
    for (let i = 0; i < 5; i++) await client.using('st:cycle', async () => {})
    const holder = client.lock('st:cycle')
    await holder.acquire()
    const waiter = client.lock('st:cycle')
    const waited = waiter.acquire()
    await waitFor(async () => (await client.inspect('st:cycle')).waiting === 1, { what: 'the waiter in line' })
    await holder.release()
    await waited
    await waiter.release()
    const stats = client.stats()
    assert.equal(stats.acquisitions, 7)
    assert.equal(stats.contended_acquisitions, 1)
    assert.equal(stats.releases, 7)
    assert.equal(stats.hold.count, 7)
    assert.deepEqual(stats.wait.buckets.at(-1), [null, 7])
    const text = client.prometheus()
    assert.match(text, /^rlock_acquisitions_total 7$/m)
    assert.match(text, /^rlock_lost_leases_total\{reason="expired"\} 0$/m)
    assert.match(text, /^rlock_hold_seconds_bucket\{le="\+Inf"\} 7$/m)
  } finally {
    await client.close()
  }
})

test("inspect() names the holder's and waiter's host, pid and runtime", async () => {
  const client = await Client.connect(env.redis.url)
  try {
    const holder = client.lock('in:held', { ttlMs: 20000 })
    await holder.acquire()
    const waiter = client.lock('in:held')
    const waited = waiter.acquire()
    await waitFor(async () => (await client.inspect('in:held')).waiting === 1, { what: 'the waiter in line' })
    const seen = await client.inspect('in:held')
    await holder.release()
    await waited
    await waiter.release()
    assert.equal(seen.held, true)
    assert.equal(seen.count, 1)
    assert.ok(seen.ttl_ms > 0 && seen.ttl_ms <= 20000)
    assert.equal(seen.holder.owner, seen.owner)
    assert.equal(seen.holder.client.host, os.hostname())
    assert.equal(seen.holder.client.pid, process.pid)
    assert.equal(seen.holder.client.face, `node ${process.versions.node}`)
    assert.equal(seen.waiters.length, 1)
    assert.notEqual(seen.waiters[0].unit, seen.holder.unit)
    assert.equal(seen.waiters[0].client_id, seen.holder.client_id)

    const free = await client.inspect('in:free')
    assert.equal(free.held, false)
    assert.equal(free.holder, null)
    await assert.rejects(client.inspect(''), TypeError)
  } finally {
    await client.close()
  }
})
