'use strict'
// client.cached(): the cache-aside read that cannot stampede. One loader per
// miss across callers, clients and processes; its failure rethrown to its
// caller and shared with the waiters; stale values served while one caller
// refreshes; values stored as bytes, text or JSON; bad input refused before
// any I/O. Waits are observed in Redis (PUBSUB NUMSUB on the entry's
// channel), never guessed with a sleep.

const assert = require('node:assert/strict')
const fs = require('node:fs')
const net = require('node:net')
const path = require('node:path')
const { test } = require('node:test')
const { Client, CacheLoaderError, LockError, LockTimeoutError } = require('../../node/index.js')
const { serve, waitFor, within, runChild } = require('./helper.js')

const env = serve()

const entryKey = (key) => `rlock:{${key}}:cached`
const rebuildKey = (key) => `rlock:{${key}}:rebuild`
const newsChannel = (key) => `rlock:{${key}}:cached:news`

/** How many connections listen on the entry's channel: one per waiting client. */
async function waiting(key) {
  const reply = await env.redis.cli('PUBSUB', 'NUMSUB', newsChannel(key))
  return Number(reply.split('\n')[1])
}

/** Resolves once `n` clients wait for the rebuild of `key`. */
function untilWaiting(key, n) {
  return waitFor(async () => (await waiting(key)) === n, { what: `${n} clients waiting on ${key}` })
}

/**
 * Starts a `cached()` of `key` whose loader gives `value` once `open()` is
 * called; resolves, once the loader runs, with that call's promise and `open`.
 */
async function loadingUntilOpened(key, value) {
  const { opened, open } = gate()
  let started = false
  const loader = async () => {
    started = true
    await opened
    return value
  }
  const loading = env.client.cached(key, loader, { ttlMs: 60000 })
  await waitFor(() => started, { what: `the loader of ${key}` })
  return { loading, open }
}

/** Resolves once the entry `key` is past its ttl, by the server's clock. */
async function untilStale(key) {
  const fresh = Number(await env.redis.cli('HGET', entryKey(key), 'fresh'))
  const now = async () => {
    const [seconds, micros] = (await env.redis.cli('TIME')).split('\n').map(Number)
    return seconds * 1000 + Math.floor(micros / 1000)
  }
  await waitFor(async () => (await now()) > fresh, { what: `${key} past its ttl` })
}

/** A promise and the function that resolves it. */
function gate() {
  let open
  const opened = new Promise((resolve) => (open = resolve))
  return { opened, open }
}

/** A client of its own on the test server, closed after `fn`. */
async function withClient(fn) {
  const client = await Client.connect(env.redis.url)
  try {
    return await fn(client)
  } finally {
    await client.close()
  }
}

/**
 * The commands clients sent while `fn` ran, as MONITOR shows them (a
 * script's own commands aside), each as its name.
 */
async function commandsSent(fn) {
  const socket = net.connect(env.redis.port, '127.0.0.1')
  let seen = ''
  socket.on('data', (d) => (seen += d))
  socket.write('MONITOR\r\n')
  await waitFor(() => seen.startsWith('+OK'), { what: 'MONITOR on' })
  try {
    await fn()
    // MONITOR streams what it sees: once this marker is in, so is all before it.
    const marker = `end-${Date.now()}`
    await env.redis.cli('ECHO', marker)
    await waitFor(() => seen.includes(marker), { what: 'the marker in MONITOR' })
    return seen
      .split('\r\n')
      .slice(1)
      .filter((line) => line !== '' && !line.includes(' lua] ') && !line.includes(marker))
      .map((line) => line.match(/\] "([^"]+)"/)[1].toLowerCase())
  } finally {
    socket.destroy()
  }
}

test('50 concurrent calls in one process run the loader once and all get its value', async () => {
  let calls = 0
  const loader = async () => {
    calls += 1
    await new Promise((resolve) => setTimeout(resolve, 50))
    return { id: 1001, price: 12 }
  }
  const values = await within(
    Promise.all(Array.from({ length: 50 }, () => env.client.cached('one-process', loader, { ttlMs: 60000 }))),
    10000,
    'the 50 calls',
  )
  assert.equal(calls, 1)
  for (const value of values) assert.deepEqual(value, { id: 1001, price: 12 })
})

test('callers of two clients share one loader call: the waiter gets the value the loader stored', async () => {
  await withClient(async (other) => {
    const release = gate()
    let calls = 0
    const loader = async () => {
      calls += 1
      await release.opened
      return 'built once'
    }
    const first = env.client.cached('two-clients', loader, { ttlMs: 60000 })
    await waitFor(() => calls === 1, { what: 'the first loader call' })
    const second = other.cached('two-clients', loader, { ttlMs: 60000 })
    await untilWaiting('two-clients', 1)
    release.open()
    assert.deepEqual(await within(Promise.all([first, second]), 5000, 'both calls'), ['built once', 'built once'])
    assert.equal(calls, 1)
  })
})

test('a caller in another process waits for this process\'s loader and gets its value', async () => {
  const key = 'two-processes'
  let calls = 0
  const loader = async () => {
    calls += 1
    // Returns once the child waits for this rebuild.
    await untilWaiting(key, 1)
    return { from: 'parent' }
  }
  const parent = env.client.cached(key, loader, { ttlMs: 60000 })
  await waitFor(() => calls === 1, { what: 'the parent loader call' })
  const child = runChild(
    `async (url) => {
      const client = await Client.connect(url)
      let calls = 0
      const value = await client.cached(${JSON.stringify(key)}, () => { calls += 1; return { from: 'child' } }, { ttlMs: 60000 })
      console.log(JSON.stringify({ calls, value }))
      await client.close()
    }`,
    env.redis.url,
  )
  assert.deepEqual(await parent, { from: 'parent' })
  const { code, output } = await child
  assert.equal(code, 0, output)
  assert.deepEqual(JSON.parse(output), { calls: 0, value: { from: 'parent' } })
  assert.equal(calls, 1)
})

test("a loader's failure is rethrown to its caller, and waiters of other clients get CacheLoaderError", async () => {
  const key = 'loader-fails'
  const failure = new Error('database down')
  await withClient(async (a) => {
    await withClient(async (b) => {
      let calls = 0
      const loader = async () => {
        calls += 1
        await untilWaiting(key, 2)
        throw failure
      }
      const own = env.client.cached(key, loader, { ttlMs: 60000 }).catch((e) => e)
      await waitFor(() => calls === 1, { what: 'the loader call' })
      const waiters = [a, b].map((c) => c.cached(key, loader, { ttlMs: 60000 }).catch((e) => e))
      assert.equal(await own, failure, 'the caller gets its loader\'s own error')
      for (const err of await within(Promise.all(waiters), 5000, 'the waiters')) {
        assert.ok(err instanceof CacheLoaderError, String(err))
        assert.ok(err instanceof LockError)
        assert.equal(err.name, 'CacheLoaderError')
        assert.equal(err.code, 'ERR_CACHE_LOADER')
        assert.equal(err.key, key)
        assert.match(err.message, /Error: database down/)
      }
      assert.equal(calls, 1, 'the waiters did not run the loader')
      assert.equal(await env.redis.cli('EXISTS', entryKey(key), rebuildKey(key)), '0')
    })
  })
})

test("onError 'retry': a waiter whose rebuild failed runs the loader itself", async () => {
  const key = 'loader-retry'
  await withClient(async (other) => {
    const failing = async () => {
      await untilWaiting(key, 1)
      throw new Error('first try failed')
    }
    const first = env.client.cached(key, failing, { ttlMs: 60000 }).catch((e) => e)
    await waitFor(async () => (await env.redis.cli('EXISTS', rebuildKey(key))) === '1', { what: 'the first rebuild' })
    let calls = 0
    const retried = other.cached(key, () => ++calls && 'second try', { ttlMs: 60000, onError: 'retry' })
    assert.equal((await first).message, 'first try failed')
    assert.equal(await within(retried, 5000, 'the retrying waiter'), 'second try')
    assert.equal(calls, 1)
  })
})

test('a waiter past its timeoutMs rejects LockTimeoutError while the rebuild goes on', async () => {
  const key = 'wait-timeout'
  const { loading, open } = await loadingUntilOpened(key, 'late')
  await withClient(async (other) => {
    const err = await other.cached(key, () => 'never', { ttlMs: 60000, timeoutMs: 200 }).catch((e) => e)
    assert.ok(err instanceof LockTimeoutError, String(err))
  })
  open()
  assert.equal(await loading, 'late')
})

test('null is cached as "nothing found" for noneTtlMs: the loader runs once for 20 reads, each undefined', async () => {
  const key = 'nothing-found'
  let calls = 0
  for (let i = 0; i < 20; i++) {
    const value = await env.client.cached(key, () => ++calls && null, { ttlMs: 600000, noneTtlMs: 5000, jitter: 0 })
    assert.equal(value, undefined)
  }
  assert.equal(calls, 1)
  const pttl = Number(await env.redis.cli('PTTL', entryKey(key)))
  assert.ok(pttl > 0 && pttl <= 5000, `kept for ${pttl} ms, not the noneTtlMs`)
  // undefined too, read back as the same "nothing found".
  assert.equal(await env.client.cached('nothing-undefined', () => undefined, { ttlMs: 60000 }), undefined)
  assert.equal(await env.client.cached('nothing-undefined', () => 'loaded again', { ttlMs: 60000 }), undefined)
})

test('past its ttl within staleMs the old value comes back at once and exactly one refresh runs in the background', async () => {
  const key = 'stale'
  const options = { ttlMs: 100, staleMs: 60000, jitter: 0, early: 0 }
  assert.equal(await env.client.cached(key, () => 'v1', options), 'v1')
  await untilStale(key)

  const release = gate()
  let refreshes = 0
  const refresh = async () => {
    refreshes += 1
    await release.opened
    return 'v2'
  }
  // The refreshed value stays fresh while the test reads it.
  const later = { ...options, ttlMs: 60000 }
  // The loader is held until every read has returned: each got the old
  // value without waiting for it.
  const reads = await within(
    Promise.all(Array.from({ length: 10 }, () => env.client.cached(key, refresh, later))),
    5000,
    'the stale reads',
  )
  assert.deepEqual(reads, Array(10).fill('v1'))
  const elsewhere = await withClient((other) => other.cached(key, refresh, later))
  assert.equal(elsewhere, 'v1', 'another client got the stale value too')
  assert.equal(refreshes, 1)
  release.open()
  await waitFor(async () => (await env.client.cached(key, refresh, later)) === 'v2', { what: 'the refreshed value' })
  assert.equal(refreshes, 1)
})

test('a background refresh that fails is a warning (RLOCK_CACHE_REFRESH), never an unhandled rejection', async () => {
  const key = 'stale-refresh-fails'
  const options = { ttlMs: 100, staleMs: 60000, jitter: 0, early: 0 }
  await env.client.cached(key, () => 'old', options)
  await untilStale(key)
  const warned = new Promise((resolve) => process.once('warning', resolve))
  const value = await env.client.cached(key, async () => {
    throw new TypeError('refresh broke')
  }, options)
  assert.equal(value, 'old')
  const warning = await within(warned, 5000, 'the warning')
  assert.equal(warning.code, 'RLOCK_CACHE_REFRESH')
  assert.match(warning.message, /stale-refresh-fails.*TypeError: refresh broke/)
  await waitFor(async () => (await env.redis.cli('EXISTS', rebuildKey(key))) === '0', { what: 'the lock given back' })
})

test('jitter takes a random share off each ttl, within its bounds', async () => {
  const pttls = []
  for (let i = 0; i < 20; i++) {
    const key = `jitter-${i}`
    await env.client.cached(key, () => i, { ttlMs: 100000, jitter: 0.5 })
    pttls.push(Number(await env.redis.cli('PTTL', entryKey(key))))
  }
  for (const pttl of pttls) assert.ok(pttl > 49000 && pttl <= 100000, `PTTL ${pttl}`)
  assert.ok(Math.max(...pttls) - Math.min(...pttls) > 1000, `no spread: ${pttls}`)
  await env.client.cached('jitter-none', () => 0, { ttlMs: 100000, jitter: 0 })
  assert.ok(Number(await env.redis.cli('PTTL', entryKey('jitter-none'))) > 99000)
})

test('invalidate() deletes the entry, so the next read loads again; false when there was none', async () => {
  const key = 'invalidated'
  assert.equal(await env.client.cached(key, () => 'v1', { ttlMs: 60000 }), 'v1')
  assert.equal(await env.client.invalidate(key), true)
  assert.equal(await env.redis.cli('EXISTS', entryKey(key)), '0')
  assert.equal(await env.client.cached(key, () => 'v2', { ttlMs: 60000 }), 'v2')
  assert.equal(await env.client.invalidate(key), true)
  assert.equal(await env.client.invalidate(key), false)
})

test('a rebuild an invalidation overtook returns its value to its caller but does not store it', async () => {
  const key = 'invalidated-while-loading'
  const { loading, open } = await loadingUntilOpened(key, 'read before the invalidation')
  await env.client.invalidate(key)
  open()
  assert.equal(await loading, 'read before the invalidation')
  assert.equal(await env.redis.cli('EXISTS', entryKey(key)), '0')
  assert.equal(await env.client.cached(key, () => 'after', { ttlMs: 60000 }), 'after')
})

test('values keep their type: an object as JSON, a Buffer as bytes, a string as text, read back by another client', async () => {
  const bytes = Buffer.from([0, 0xff, 0xfe, 10, 0x80])
  const rows = [
    ['format-json', { a: [1, 'two', null], b: { c: true } }, 'json'],
    ['format-number', 42, 'json'],
    ['format-bytes', bytes, 'bytes'],
    ['format-text', 'héllo, 世界', 'text'],
    ['format-empty-text', '', 'text'],
  ]
  for (const [key, value, format] of rows) {
    assert.deepEqual(await env.client.cached(key, () => value, { ttlMs: 60000 }), value, key)
    assert.equal(await env.redis.cli('HGET', entryKey(key), 'format'), format, key)
  }
  assert.equal(await env.redis.cli('HGET', entryKey('format-json'), 'value'), '{"a":[1,"two",null],"b":{"c":true}}')
  await withClient(async (other) => {
    const never = () => {
      throw new Error('a hit runs no loader')
    }
    for (const [key, value] of rows) {
      const read = await other.cached(key, never, { ttlMs: 60000 })
      assert.deepEqual(read, value, key)
      assert.equal(Buffer.isBuffer(read), Buffer.isBuffer(value), key)
    }
  })
  const view = new Uint8Array([1, 2, 3, 4]).subarray(1, 3)
  await env.client.cached('format-view', () => view, { ttlMs: 60000 })
  assert.deepEqual(await env.client.cached('format-view', () => null, { ttlMs: 60000 }), Buffer.from([2, 3]))
})

test("an entry of Python's pickle format is refused with a clear error, not misread", async () => {
  const key = 'format-pickle'
  await env.client.cached(key, () => 'x', { ttlMs: 60000 })
  await env.redis.cli('HSET', entryKey(key), 'format', 'pickle')
  const err = await env.client.cached(key, () => 'never', { ttlMs: 60000 }).catch((e) => e)
  assert.ok(err instanceof TypeError, String(err))
  assert.equal(err.code, 'ERR_CACHE_FORMAT')
  assert.match(err.message, /pickle.*only Python/)
})

test('a value JSON cannot encode is a TypeError before anything is written, and the lock is given back', async () => {
  const cycle = {}
  cycle.self = cycle
  const values = [['bigint', 10n], ['cycle', cycle], ['function', () => 1], ['symbol', Symbol('s')], ['nested-bigint', { n: 1n }]]
  for (const [what, value] of values) {
    const key = `unencodable-${what}`
    const err = await env.client.cached(key, () => value, { ttlMs: 60000 }).catch((e) => e)
    assert.ok(err instanceof TypeError, `${what}: ${err}`)
    assert.equal(err.code, 'ERR_INVALID_ARG', what)
    assert.match(err.message, /cannot be stored as JSON/, what)
    assert.equal(await env.redis.cli('EXISTS', entryKey(key), rebuildKey(key)), '0', what)
  }
})

test('bad input rejects with a typed error before any I/O', async () => {
  const loader = () => 1
  const ok = { ttlMs: 1000 }
  const rows = [
    [[''], TypeError],
    [['}brace'], TypeError],
    [['lone \udc80'], TypeError],
    [[42], TypeError],
    [[undefined], TypeError],
    [['k', undefined, ok], TypeError],
    [['k', 'loader', ok], TypeError],
    [['k', {}, ok], TypeError],
    [['k', loader], TypeError],
    [['k', loader, {}], TypeError],
    [['k', loader, 5], TypeError],
    [['k', loader, { ttlMs: '1000' }], TypeError],
    [['k', loader, { ttlMs: 0 }], RangeError],
    [['k', loader, { ttlMs: -1 }], RangeError],
    [['k', loader, { ttlMs: NaN }], RangeError],
    [['k', loader, { ...ok, staleMs: -1 }], RangeError],
    [['k', loader, { ...ok, noneTtlMs: 0 }], RangeError],
    [['k', loader, { ...ok, jitter: 1 }], RangeError],
    [['k', loader, { ...ok, jitter: -0.1 }], RangeError],
    [['k', loader, { ...ok, early: -1 }], RangeError],
    [['k', loader, { ...ok, early: 101 }], RangeError],
    [['k', loader, { ...ok, timeoutMs: -1 }], RangeError],
    [['k', loader, { ...ok, onError: 'ignore' }], RangeError],
    [['k', loader, { ...ok, onError: 1 }], TypeError],
    [['k', loader, { ...ok, lockTtlMs: 0 }], RangeError],
    [['k', loader, { ...ok, ttl: 1000 }], TypeError],
  ]
  const sent = await commandsSent(async () => {
    for (const [args, ErrorClass] of rows) {
      const err = await within(env.client.cached(...args), 2000, 'a bad call').then(
        () => assert.fail(`resolved: ${args.map(String)}`),
        (e) => e,
      )
      assert.ok(err instanceof ErrorClass, `${args.map(String)}: ${err}`)
      assert.equal(err.code, 'ERR_INVALID_ARG', `${args.map(String)}: ${err}`)
    }
    for (const key of ['', 42]) {
      const err = await env.client.invalidate(key).catch((e) => e)
      assert.ok(err instanceof TypeError, String(err))
      assert.equal(err.code, 'ERR_INVALID_ARG')
    }
  })
  assert.deepEqual(sent, [])
  const unknown = await env.client.cached('k', loader, { ttl: 1000 }).catch((e) => e)
  assert.match(unknown.message, /unknown option `ttl` \(did you mean `ttlMs`\?\)/)
})

test('a hit costs one command', async () => {
  const key = 'one-command'
  await env.client.cached(key, () => 'v', { ttlMs: 60000, early: 0 })
  await env.client.cached(key, () => 'v', { ttlMs: 60000, early: 0 }) // scripts loaded
  let value
  const sent = await commandsSent(async () => {
    value = await env.client.cached(key, () => 'not run', { ttlMs: 60000, early: 0 })
  })
  assert.equal(value, 'v')
  assert.deepEqual(sent, ['evalsha'])
})

test('the cache keeps no handle that holds the process open: a child exits once its reads and refresh are done', async () => {
  const { code, output } = await runChild(
    `async (url) => {
      const client = await Client.connect(url)
      const options = { ttlMs: 50, staleMs: 60000, jitter: 0, early: 0 }
      await client.cached('child-exit', () => 'v1', options)
      await new Promise((resolve) => setTimeout(resolve, 100))
      console.log(await client.cached('child-exit', async () => 'v2', options))
      // No close(): the refresh finishes, then nothing is left to wait for.
    }`,
    env.redis.url,
  )
  assert.equal(code, 0, output)
  assert.equal(output.trim(), 'v1')
  await waitFor(async () => (await env.redis.cli('HGET', entryKey('child-exit'), 'value')) === 'v2', {
    what: "the child's refresh stored",
  })
})

test("index.d.ts's CacheOptions are exactly the options the addon reads, and CacheLoaderError is exported", () => {
  const native = require('../../node/native.js')
  const declared = fs.readFileSync(path.join(__dirname, '..', '..', 'node', 'index.d.ts'), 'utf8')
  const body = declared.match(/export interface CacheOptions \{([\s\S]*?)\n\}/)[1]
  const documented = [...body.matchAll(/^ {2}(\w+)\??:/gm)].map((m) => m[1])
  assert.deepEqual(documented.sort(), native.cacheOptionNames().sort())
  assert.equal(new CacheLoaderError('m', 'k').code, 'ERR_CACHE_LOADER')
  assert.match(declared, /export declare class CacheLoaderError extends LockError/)
})
