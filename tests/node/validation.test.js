'use strict'
// The invalid-argument matrix: every public entry point, every argument, each
// bad value with the error it must raise (a TypeError or RangeError with code
// ERR_INVALID_ARG: thrown by client.lock(), a rejection from async methods).
// Each row runs on a client already connected to a real server, under a
// deadline, and must send nothing to Redis.

const assert = require('node:assert/strict')
const net = require('node:net')
const { test } = require('node:test')
const { Client } = require('../../node/index.js')
const { serve, within } = require('./helper.js')

const env = serve()
const MIB = 1024 * 1024
const YEAR_MS = 365 * 24 * 3600 * 1000

const NOT_NUMBERS = [['1000', TypeError], [true, TypeError], [10n, TypeError], [{}, TypeError], [[1], TypeError]]
const NON_FINITE = [[NaN, RangeError], [Infinity, RangeError], [-Infinity, RangeError]]
const HUGE = [[1e300, RangeError], [2 ** 64, RangeError], [Number.MAX_SAFE_INTEGER + 2, RangeError], [YEAR_MS * 1.1, RangeError]]
// 1 and 9.9 ms: below the shortest usable lease (10 ms), which could never be counted as held.
const LEASES = [[0, RangeError], [-0, RangeError], [-1, RangeError], [0.5, RangeError], [1, RangeError], [9.9, RangeError], ...NON_FINITE, ...HUGE, ...NOT_NUMBERS, [null, TypeError]]
const WAITS = [[-1, RangeError], [-0.001, RangeError], ...NON_FINITE, ...HUGE, ...NOT_NUMBERS]
const NOT_BOOLS = [['yes', TypeError], [0, TypeError], [1, TypeError], [{}, TypeError]]
const NOT_OBJECTS = [[5, TypeError], ['x', TypeError], [true, TypeError], [() => ({}), TypeError]]
const NAMES = [
  ['', TypeError],
  ['}starts-with-a-brace', TypeError],
  ['x'.repeat(MIB + 1), TypeError],
  ['\u00e9'.repeat(MIB / 2 + 1), TypeError], // over 1 MiB of UTF-8
  ['lone \udc80 surrogate', TypeError], // would become U+FFFD: two names, one lock
  ['high \ud800', TypeError],
  [undefined, TypeError],
  [null, TypeError],
  [42, TypeError],
  [{}, TypeError],
  [['x'], TypeError],
  [Symbol('x'), TypeError],
  [new String('x'), TypeError], // eslint-disable-line no-new-wrappers
]
const URLS = [
  ['', TypeError],
  ['not a url', TypeError],
  ['http://127.0.0.1:6379', TypeError],
  ['http://user:hunter2@127.0.0.1:1', TypeError],
  ['REDIS://127.0.0.1', TypeError],
  ['unix:///tmp/redis.sock', TypeError],
  ['redis://', TypeError],
  ['rediss://', TypeError],
  ['redis+sentinel://', TypeError],
  ['127.0.0.1:6379', TypeError],
  ['redis://127.0.0.1:99999', TypeError],
  ['redis://[::1', TypeError],
  ['redis://host/notadb', TypeError],
  ['redis://host/-1', TypeError],
  ['redis://:@', TypeError],
  [42, TypeError],
  [5n, TypeError],
  [true, TypeError],
]
const PREFIXES = [
  ['', TypeError],
  ['has space', TypeError],
  ['{x}', TypeError],
  ['tab\t', TypeError],
  ['nul\0', TypeError],
  ['p'.repeat(257), TypeError],
  [7, TypeError],
  [null, TypeError],
  [{}, TypeError],
]
const SIGNALS = [[null, TypeError], [{}, TypeError], [5, TypeError], ['abort', TypeError]]
// A number of permits: a whole number from 1 to 1000000 (to the size, for an acquisition).
const PERMITS = [
  [0, RangeError],
  [-1, RangeError],
  [1.5, RangeError],
  [1e7, RangeError],
  [1_000_001, RangeError],
  ...NON_FINITE,
  [2 ** 64, RangeError],
  ['3', TypeError],
  [null, TypeError],
  [3n, TypeError],
  [{}, TypeError],
]
const NOT_FUNCTIONS = [[undefined, TypeError], [5, TypeError], ['fn', TypeError]]

function show(value) {
  if (typeof value === 'symbol' || typeof value === 'bigint') return `${String(value)}${typeof value === 'bigint' ? 'n' : ''}`
  if (typeof value === 'function') return 'a function'
  if (value instanceof String) return 'new String()'
  const text = value === undefined ? 'undefined' : Number.isNaN(value) ? 'NaN' : JSON.stringify(value) ?? String(value)
  return text.length > 40 ? `${text.slice(0, 20)}...(${text.length} chars)` : text
}

/** [label, (client) => the call, expected class, thrown synchronously?, a word the message has] */
function* matrix() {
  const lockOptions = [
    ...LEASES.map(([v, e]) => ['ttlMs', v, e]),
    ...WAITS.map(([v, e]) => ['timeoutMs', v, e]),
    ...WAITS.map(([v, e]) => ['queueAfterMs', v, e]),
    ...LEASES.filter(([v]) => v !== null).map(([v, e]) => ['maxHoldMs', v, e]),
    ...NOT_BOOLS.map(([v, e]) => ['autoRenew', v, e]),
    ...NOT_BOOLS.map(([v, e]) => ['allowLongTtl', v, e]),
  ]
  for (const [key, value, expected] of lockOptions) {
    // The message names the option as the caller wrote it.
    yield [`client.lock('x', { ${key}: ${show(value)} })`, (c) => c.lock('x', { [key]: value }), expected, true, key]
    yield [`client.using('x', { ${key}: ${show(value)} }, fn)`, (c) => c.using('x', { [key]: value }, () => 1), expected, false, key]
  }
  for (const [name, expected] of NAMES) {
    yield [`client.lock(${show(name)})`, (c) => c.lock(name), expected, true]
    yield [`client.using(${show(name)}, fn)`, (c) => c.using(name, () => 1), expected]
  }
  for (const [options, expected] of NOT_OBJECTS) {
    yield [`client.lock('x', ${show(options)})`, (c) => c.lock('x', options), expected, true]
  }
  for (const [fn, expected] of NOT_FUNCTIONS) {
    yield [`client.using('x', {}, ${show(fn)})`, (c) => c.using('x', {}, fn), expected]
  }
  for (const [signal, expected] of SIGNALS) {
    yield [`lock.acquire({ signal: ${show(signal)} })`, (c) => c.lock('x').acquire({ signal }), expected]
    yield [`client.using('x', { signal: ${show(signal)} }, fn)`, (c) => c.using('x', { signal }, () => 1), expected]
  }
  for (const [options, expected] of NOT_OBJECTS) {
    yield [`lock.acquire(${show(options)})`, (c) => c.lock('x').acquire(options), expected]
  }
  for (const [ttlMs, expected] of LEASES) {
    yield [`lock.extend(${show(ttlMs)})`, (c) => c.lock('x').extend(ttlMs), expected]
  }
  for (const [fn, expected] of NOT_FUNCTIONS) {
    yield [`lock.using({}, ${show(fn)})`, (c) => c.lock('x').using({}, fn), expected]
  }
  for (const [name, expected] of NAMES) {
    yield [`client.rwLock(${show(name)})`, (c) => c.rwLock(name), expected, true]
    yield [`client.semaphore(${show(name)}, { permits: 3 })`, (c) => c.semaphore(name, { permits: 3 }), expected, true]
  }
  for (const [ttlMs, expected] of LEASES.filter(([v]) => v !== null)) {
    yield [`client.rwLock('x', { ttlMs: ${show(ttlMs)} })`, (c) => c.rwLock('x', { ttlMs }), expected, true, 'ttlMs']
    const semaphore = (c) => c.semaphore('x', { permits: 3, ttlMs })
    yield [`client.semaphore('x', { permits: 3, ttlMs: ${show(ttlMs)} })`, semaphore, expected, true, 'ttlMs']
  }
  for (const [permits, expected] of [...PERMITS, [undefined, TypeError]]) {
    yield [`client.semaphore('x', { permits: ${show(permits)} })`, (c) => c.semaphore('x', { permits }), expected, true, 'permits']
  }
  for (const [permits, expected] of [...PERMITS, [4, RangeError]]) {
    const sem = (c) => c.semaphore('x', { permits: 3 })
    yield [`semaphore.acquire({ permits: ${show(permits)} })`, (c) => sem(c).acquire({ permits }), expected, false, 'permits']
    yield [`semaphore.tryAcquire({ permits: ${show(permits)} })`, (c) => sem(c).tryAcquire({ permits }), expected, false, 'permits']
    yield [`semaphore.using({ permits: ${show(permits)} }, fn)`, (c) => sem(c).using({ permits }, () => 1), expected, false, 'permits']
  }
  for (const [options, expected] of NOT_OBJECTS) {
    yield [`client.rwLock('x', ${show(options)})`, (c) => c.rwLock('x', options), expected, true]
    yield [`client.semaphore('x', ${show(options)})`, (c) => c.semaphore('x', options), expected, true]
  }
  for (const [url, expected] of URLS) {
    yield [`Client.connect(${show(url)})`, () => Client.connect(url), expected]
  }
  for (const [prefix, expected] of PREFIXES) {
    yield [`Client.connect(url, { prefix: ${show(prefix)} })`, () => Client.connect(env.redis.url, { prefix }), expected]
  }
  for (const [options, expected] of NOT_OBJECTS) {
    yield [`Client.connect(url, ${show(options)})`, () => Client.connect(env.redis.url, options), expected]
  }
  // Keys no options object has (other packages' names, another call's
  // options) are refused, never ignored: the message names the key.
  for (const key of ['timeout', 'acquireTimeout', 'ttl', 'retryCount', 'signal']) {
    yield [`client.lock('x', { ${key} })`, (c) => c.lock('x', { [key]: 1 }), TypeError, true, key]
  }
  for (const key of ['timeout', 'ttl', 'lockTimeout']) {
    yield [`client.using('x', { ${key} }, fn)`, (c) => c.using('x', { [key]: 1 }, () => 1), TypeError, false, key]
  }
  for (const key of ['timeoutMs', 'timeout']) {
    yield [`lock.acquire({ ${key} })`, (c) => c.lock('x').acquire({ [key]: 1 }), TypeError, false, key]
  }
  // A mutex's acquisition takes no permits; a semaphore's is told `permits`, never `n` or `count`.
  yield [`lock.acquire({ permits })`, (c) => c.lock('x').acquire({ permits: 1 }), TypeError, false, 'permits']
  for (const key of ['n', 'count', 'timeoutMs']) {
    yield [`semaphore.acquire({ ${key} })`, (c) => c.semaphore('x', { permits: 3 }).acquire({ [key]: 1 }), TypeError, false, key]
  }
  for (const key of ['size', 'limit', 'signal']) {
    yield [`client.semaphore('x', { permits: 3, ${key} })`, (c) => c.semaphore('x', { permits: 3, [key]: 1 }), TypeError, true, key]
  }
  yield [`client.rwLock('x', { permits })`, (c) => c.rwLock('x', { permits: 3 }), TypeError, true, 'permits']
  for (const key of ['clustr', 'ttlMs', 'password']) {
    yield [`Client.connect(url, { ${key} })`, () => Client.connect(env.redis.url, { [key]: 1 }), TypeError, false, key]
  }
}

/** Calls Redis has run, but for the INFO and DBSIZE used to ask, over one connection. */
function commandCounter(port) {
  const socket = net.connect(port, '127.0.0.1')
  let buffered = ''
  let waiting = null
  socket.setEncoding('utf8')
  socket.on('data', (data) => {
    buffered += data
    const header = buffered.match(/^\$(\d+)\r\n/)
    if (header && Buffer.byteLength(buffered) >= header[0].length + Number(header[1]) + 2) {
      const body = buffered.slice(header[0].length)
      buffered = ''
      waiting(body)
    }
  })
  return {
    async count() {
      const info = await new Promise((resolve) => {
        waiting = resolve
        socket.write('INFO commandstats\r\n')
      })
      return info
        .split('\r\n')
        .filter((line) => line.startsWith('cmdstat_') && !/^cmdstat_(info|dbsize):/.test(line))
        .reduce((sum, line) => sum + Number(line.match(/calls=(\d+)/)[1]), 0)
    },
    close: () => socket.destroy(),
  }
}

test('every bad argument of every entry point is a typed ERR_INVALID_ARG at once, and nothing reaches Redis', async (t) => {
  const counter = commandCounter(env.redis.port)
  await env.client.lock('warm').isLocked() // connected: a stray command would show
  const keys = await env.redis.cli('DBSIZE')
  try {
    for (const [label, call, expected, sync, named] of matrix()) {
      await t.test(label, async () => {
        const before = await counter.count()
        const start = process.hrtime.bigint()
        let err
        let threw = false
        try {
          const result = call(env.client)
          err = await within(
            Promise.resolve(result).then(() => assert.fail('accepted'), (e) => e),
            5000,
            label,
          )
        } catch (e) {
          threw = true
          err = e
        }
        assert.ok(err instanceof expected, `${err?.constructor?.name}: ${err?.message}`)
        assert.equal(err.code, 'ERR_INVALID_ARG', err.message)
        assert.equal(threw, sync === true, sync ? 'thrown, not a rejection' : 'a rejection, not thrown')
        if (named) assert.match(err.message, new RegExp(named))
        assert.doesNotMatch(`${err.message} ${err.stack}`, /hunter2/)
        assert.ok(process.hrtime.bigint() - start < 1_000_000_000n, 'refused before any I/O, so at once')
        assert.equal(await counter.count(), before, 'nothing reached Redis')
      })
    }
  } finally {
    counter.close()
  }
  assert.equal(await env.redis.cli('DBSIZE'), keys)
})

test('an unknown option names itself and the closest known one', async () => {
  const refused = (message) => (err) => {
    assert.ok(err instanceof TypeError, `${err?.name}: ${err?.message}`)
    assert.equal(err.code, 'ERR_INVALID_ARG')
    assert.equal(err.message, message)
    return true
  }
  // node-redlock's and redis-semaphore's habits, which used to wait forever
  // or lease for the default 30 s.
  assert.throws(() => env.client.lock('x', { timeout: 300 }), refused('unknown option `timeout` (did you mean `timeoutMs`?)'))
  assert.throws(() => env.client.lock('x', { acquireTimeout: 300 }), refused('unknown option `acquireTimeout` (did you mean `timeoutMs`?)'))
  assert.throws(() => env.client.lock('x', { ttl: 10 }), refused('unknown option `ttl` (did you mean `ttlMs`?)'))
  assert.throws(() => env.client.lock('x', { autorenew: false }), refused('unknown option `autorenew` (did you mean `autoRenew`?)'))
  await assert.rejects(env.client.using('x', { timeout: 300 }, () => 1), refused('unknown option `timeout` (did you mean `timeoutMs`?)'))
  await assert.rejects(env.client.using('x', { signl: null }, () => 1), refused('unknown option `signl` (did you mean `signal`?)'))
  await assert.rejects(Client.connect(env.redis.url, { clustr: true }), refused('unknown option `clustr` (did you mean `cluster`?)'))
  // Nothing close: the message lists what there is.
  await assert.rejects(env.client.lock('x').acquire({ timeoutMs: 1 }), refused('unknown option `timeoutMs` (the options are `signal`)'))
  assert.throws(() => env.client.lock('x', { retryCount: 3 }), (err) => {
    assert.match(err.message, /^unknown option `retryCount` \(the options are `ttlMs`, `timeoutMs`, .*`allowLongTtl`\)$/)
    return true
  })
})

test('every documented lock option is a known one', async () => {
  const options = {
    ttlMs: 5000,
    timeoutMs: 100,
    autoRenew: true,
    maxHoldMs: 60000,
    syncReplicas: 1,
    fair: false,
    queueAfterMs: 10,
    allowLongTtl: false,
  }
  assert.ok(env.client.lock('known', options))
  const { syncReplicas, ...withoutReplicas } = options // this server has no replica to wait for
  assert.equal(await env.client.using('known', { ...withoutReplicas, signal: AbortSignal.timeout(5000) }, () => 'ran'), 'ran')
})
