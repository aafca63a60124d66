'use strict'
// The Node worker of the benchmark: one process, driven by the harness over
// JSON lines (one request per line on stdin, one reply per line on stdout).
//
//   node worker.js URL [URL...]
//
// Contenders:
//   floor            ioredis sending the bare cycle: SET NX PX, then EVALSHA compare-and-delete
//   rlock            redis-rlock (this project's release addon, from $RLOCK_NODE); rlock-fair: in fair mode
//   redlock          node-redlock (the version npm serves), over ioredis
//   redis-semaphore  redis-semaphore's Mutex (RedlockMutex over several URLs), over ioredis
//   rlock-replay     ioredis sending the very two commands redis-rlock sends for a cycle
//                    (captured with MONITOR): the server's work of redis-rlock's cycle at
//                    the client cost of ioredis, a bound for S1 (one server only)
//   sem:rlock        one permit of a redis-rlock semaphore of `permits` permits
//   sem:redis-semaphore  one permit of redis-semaphore's Semaphore (limit `permits`), over ioredis
//   read:rlock, write:rlock  the two sides of a redis-rlock read-write lock
//
// Timestamps are process.hrtime.bigint(): CLOCK_MONOTONIC, as in the Python
// and Rust workers.

const fs = require('fs')
const path = require('path')
const readline = require('readline')
const Redis = require('ioredis')

const COMPARE_AND_DELETE =
  "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"
const TOKEN = 'rlock-bench-floor'
const URLS = process.argv.slice(2)
const now = () => Number(process.hrtime.bigint())

const cache = {}
function ioredis(i = 0) {
  cache[`io${i}`] ??= new Redis(URLS[i])
  return cache[`io${i}`]
}

async function rlockClient() {
  if (!cache.rlock) {
    const { Client } = require(process.env.RLOCK_NODE ?? path.join(__dirname, '.build/node/index.js'))
    cache.rlock = await Client.connect(URLS.length === 1 ? URLS[0] : URLS)
  }
  return cache.rlock
}

// A contender is { acquire, release }: acquire() resolves true once held (the
// floor makes one attempt: it only runs uncontended).
async function make(name, key, ttlMs, { wait = false, permits = 1 } = {}) {
  switch (name) {
    case 'floor': {
      const r = ioredis()
      cache.sha ??= await r.script('LOAD', COMPARE_AND_DELETE)
      return {
        acquire: async () => (await r.set(key, TOKEN, 'PX', ttlMs, 'NX')) === 'OK',
        release: async () => {
          if ((await r.evalsha(cache.sha, 1, key, TOKEN)) !== 1) throw new Error('floor: the key was not ours')
        },
      }
    }
    case 'rlock':
    case 'rlock-fair': {
      const lock = (await rlockClient()).lock(key, { ttlMs, ...(name === 'rlock-fair' ? { fair: true } : {}) })
      return { acquire: () => lock.acquire().then(() => true), release: () => lock.release() }
    }
    case 'sem:rlock': {
      const sem = (await rlockClient()).semaphore(key, { permits, ttlMs })
      return { acquire: () => sem.acquire().then(() => true), release: () => sem.release() }
    }
    case 'read:rlock':
    case 'write:rlock': {
      const rw = (await rlockClient()).rwLock(key, { ttlMs })
      const side = name === 'read:rlock' ? rw.read : rw.write
      return { acquire: () => side.acquire().then(() => true), release: () => side.release() }
    }
    case 'rlock-replay': {
      // Captured once per key: later blocks send nothing but the cycle.
      cache[`replay:${key}`] ??= await captureCycle(key, ttlMs)
      const { acquire, release, fenceAt } = cache[`replay:${key}`]
      const r = ioredis()
      return {
        acquire: async () => {
          const reply = await r.call(...acquire)
          // The release names the holding it ends by its fencing token.
          if (fenceAt >= 0) release[fenceAt] = String(reply[1])
          return reply[0] === 1
        },
        release: async () => {
          if ((await r.call(...release)) !== 0) throw new Error('rlock-replay: the release was refused')
        },
      }
    }
    case 'redlock': {
      const Redlock = require('redlock')
      // retryCount -1: wait until acquired, as every other contender does.
      cache.redlock ??= new Redlock(URLS.map((_, i) => ioredis(i)), { retryCount: -1 })
      let held = null
      return {
        acquire: async () => {
          held = await cache.redlock.lock(key, ttlMs)
          return true
        },
        release: () => held.unlock(),
      }
    }
    case 'redis-semaphore': {
      const { Mutex, RedlockMutex } = require('redis-semaphore')
      // A long acquireTimeout when waiting (its default gives up after 10 s).
      const options = { lockTimeout: ttlMs, ...(wait ? { acquireTimeout: 3_600_000 } : {}) }
      const mutex =
        URLS.length === 1
          ? new Mutex(ioredis(), key, options)
          : new RedlockMutex(URLS.map((_, i) => ioredis(i)), key, options)
      return { acquire: () => mutex.acquire().then(() => true), release: () => mutex.release() }
    }
    case 'sem:redis-semaphore': {
      const { Semaphore } = require('redis-semaphore')
      const options = { lockTimeout: ttlMs, ...(wait ? { acquireTimeout: 3_600_000 } : {}) }
      const sem = new Semaphore(ioredis(), key, permits, options)
      return { acquire: () => sem.acquire().then(() => true), release: () => sem.release() }
    }
    default:
      throw new Error(`unknown contender ${name}`)
  }
}

// The two commands (the acquire and release script calls) that redis-rlock
// sends for one uncontended cycle on `key`, as MONITOR saw them, and where
// the release carries the holding's fencing token.
async function captureCycle(key, ttlMs) {
  const lock = (await rlockClient()).lock(key, { ttlMs })
  // A first cycle loads the scripts, so the captured ones go out as EVALSHA.
  await lock.acquire()
  await lock.release()
  const monitor = await ioredis().monitor()
  const seen = []
  const done = new Promise((resolve) =>
    monitor.on('monitor', (_time, args, source) => {
      if (source !== 'lua' && /^evalsha$/i.test(args[0]) && args.includes(`rlock:{${key}}`)) {
        seen.push(args)
        if (seen.length === 2) resolve()
      }
    }),
  )
  await lock.acquire()
  const fence = String(lock.fencingToken)
  await lock.release()
  let timer
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`rlock-replay: saw ${seen.length} of the cycle's 2 commands`)), 5000)
  })
  try {
    await Promise.race([done, timeout])
  } finally {
    clearTimeout(timer)
    monitor.disconnect()
  }
  const [acquire, release] = seen
  // Where the release carries the captured holding's token (among its
  // arguments after the keys), if it does: each replayed cycle puts the
  // token its own acquire got there.
  const argsFrom = 3 + Number(release[2])
  const at = release.flatMap((a, i) => (i >= argsFrom && a === fence ? [i] : []))
  if (at.length > 1) throw new Error(`rlock-replay: the token ${fence} is in the release ${at.length} times`)
  return { acquire, release, fenceAt: at.length ? at[0] : -1 }
}

// `n` uncontended cycles; with `pair`, that contender's cycles alternate with
// them in chunks of `chunk` (its latencies come back as `pair_lat`).
async function s1(req) {
  const chunk = req.chunk || req.n
  const runs = [['lat', await make(req.contender, req.key, 30000, { permits: req.permits })]]
  if (req.pair) runs.unshift(['pair_lat', await make(req.pair, `${req.key}:pair`, 30000)])
  const out = { lat: [], pair_lat: [], wall: 0, pair_wall: 0 }
  for (let done = 0; done < req.n; ) {
    const k = Math.min(chunk, req.n - done)
    for (const [field, c] of runs) {
      const start = now()
      for (let i = 0; i < k; i++) {
        const t = now()
        if (!(await c.acquire())) throw new Error('uncontended acquire failed')
        await c.release()
        out[field].push(now() - t)
      }
      out[field === 'lat' ? 'wall' : 'pair_wall'] += now() - start
    }
    done += k
  }
  return out
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

// Acquire / hold / release from `start` to `end`: with `counter`, the hold
// increments a shared non-atomic counter (a file); `hold_ms` sleeps inside,
// `pause_ms` after each release. One record [wanted, acquired, releasing,
// released] per acquisition.
async function s2(req) {
  const permits = req.permits
  const warm = await make(req.contender, req.warm, 30000, { permits })
  await warm.acquire()
  await warm.release()
  const c = await make(req.contender, req.key, 30000, { wait: true, permits })
  const fd = req.counter ? fs.openSync(req.counter, 'r+') : null
  const buf = Buffer.alloc(8)
  await sleep(Math.max(0, (req.start - now()) / 1e6))
  const rec = []
  let errors = 0
  try {
    for (;;) {
      const wanted = now()
      if (wanted >= req.end) break
      for (;;) {
        try {
          if (await c.acquire()) break
        } catch {
          // a peer gave up waiting: the caller waits on
        }
        errors++
      }
      const acquired = now()
      if (fd !== null) {
        // The non-atomic counter: two holders at once would lose an increment.
        fs.readSync(fd, buf, 0, 8, 0)
        buf.writeBigUInt64LE(buf.readBigUInt64LE(0) + 1n)
        fs.writeSync(fd, buf, 0, 8, 0)
      }
      if (req.hold_ms) await sleep(req.hold_ms)
      const releasing = now()
      await c.release()
      rec.push([wanted, acquired, releasing, now()])
      if (req.pause_ms) await sleep(req.pause_ms)
    }
  } finally {
    if (fd !== null) fs.closeSync(fd)
  }
  return { rec, errors }
}

// `handles` promises of this process, each with its own lock on one key (one
// client), loop acquire / increment a counter / release from `start` to
// `end`: one record [wanted, acquired, releasing, released] per acquisition,
// per promise.
async function s7(req) {
  const contenders = []
  for (let i = 0; i < req.handles; i++) contenders.push(await make(req.contender, req.key, 30000, { wait: true }))
  const warm = await make(req.contender, req.warm, 30000)
  await warm.acquire()
  await warm.release()
  await sleep(Math.max(0, (req.start - now()) / 1e6))
  let counter = 0
  const recs = await Promise.all(
    contenders.map(async (c) => {
      const rec = []
      for (;;) {
        const wanted = now()
        if (wanted >= req.end) return rec
        await c.acquire()
        const acquired = now()
        // Read, yield to the other promises, write: two holders at once
        // would lose an increment.
        const value = counter
        await null
        counter = value + 1
        const releasing = now()
        await c.release()
        rec.push([wanted, acquired, releasing, now()])
      }
    }),
  )
  return { recs, counter }
}

// What idle() keeps holding until the harness ends this process.
const held = []

// `permits` holders with a long lease, then `waiters` waiting on the same key,
// of the kinds in `waiter_kinds` in turn (the contender's own by default).
async function idle(req) {
  const permits = req.permits ?? 1
  const kinds = req.waiter_kinds ?? [req.contender]
  for (let i = 0; i < permits; i++) {
    const holder = await make(req.contender, req.key, 60000, { permits })
    await holder.acquire()
    held.push(holder)
  }
  for (let i = 0; i < req.waiters; i++) {
    const c = await make(kinds[i % kinds.length], req.key, 60000, { wait: true, permits })
    c.acquire().catch(() => {})
  }
  return { ready: true }
}

async function main() {
  const ops = { s1, s2, s7, idle }
  const lines = readline.createInterface({ input: process.stdin })
  for await (const line of lines) {
    const req = JSON.parse(line)
    if (req.op === 'exit') break
    let reply
    try {
      reply = await ops[req.op](req)
    } catch (err) {
      reply = { error: String(err?.stack ?? err) }
    }
    process.stdout.write(JSON.stringify(reply) + '\n')
  }
  process.exit(0)
}

main()
