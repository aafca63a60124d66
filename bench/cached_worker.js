'use strict'
// The Node worker of S10 (`cached`): one process, driven by the harness over
// JSON lines like worker.js (one request per line on stdin, one reply per
// line on stdout).
//
//   node cached_worker.js URL
//
// Contenders, each a cache-aside read of one key through a library that
// keeps its entries in Redis:
//   cached:rlock             redis-rlock's client.cached (this project's release addon,
//                            from $RLOCK_NODE), no stale window
//   cached:rlock-stale       the same with staleMs: an expired entry is served while one
//                            caller refreshes it in the background
//   cached:bentocache        bentocache's getOrSet, Redis as its only layer (L2, over
//                            ioredis), no grace period; its stampede protection is a lock
//                            inside the process
//   cached:bentocache-grace  the same with a grace period (the stale window) and its
//                            default soft timeout of 0: an expired value is returned at
//                            once while the factory runs in the background
//
// The loader of every contender sleeps `loader_ms`, then RPUSHes "t0 t1 pid"
// (its start and end, CLOCK_MONOTONIC ns, and its process) to the `loads` list, so the harness
// counts every loader call of every process exactly; its value carries t1,
// so a reader can tell whether the value it got was made after its read
// began (it waited for a loader).
//
// Requests: read, cold, seq, as in cached_worker.py.

const path = require('path')
const readline = require('readline')
const Redis = require('ioredis')

const URL = process.argv[2]
const now = () => Number(process.hrtime.bigint())
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const uniform = (lo, hi) => lo + Math.random() * (hi - lo)

const shared = {}
function ioredis() {
  shared.io ??= new Redis(URL)
  return shared.io
}

async function rlockClient() {
  if (!shared.rlock) {
    const { Client } = require(process.env.RLOCK_NODE ?? path.join(__dirname, '.build/node/index.js'))
    shared.rlock = await Client.connect(URL)
  }
  return shared.rlock
}

// The t1 a value carries: an object, or its JSON as bytes (a value another
// face stored as bytes, in the mixed block).
function t1Of(value) {
  if (Buffer.isBuffer(value) || typeof value === 'string') value = JSON.parse(value.toString())
  if (typeof value.t1 !== 'number') throw new Error('a value without t1')
  return value.t1
}

// bentocache ships as an ES module only.
async function bentocache() {
  if (!shared.bento) {
    const { BentoCache, bentostore } = await import('bentocache')
    const { redisDriver } = await import('bentocache/drivers/redis')
    shared.bento = new BentoCache({
      default: 'redis',
      stores: { redis: bentostore().useL2Layer(redisDriver({ connection: new Redis(URL) })) },
    })
  }
  return shared.bento
}

function loader(req) {
  const r = ioredis()
  return async () => {
    const t0 = now()
    await sleep(req.loader_ms)
    const t1 = now()
    await r.rpush(req.loads, `${t0} ${t1} ${process.pid}`)
    return { t0, t1 }
  }
}

// The read of a contender: key => Promise<value>.
async function make(req) {
  const load = loader(req)
  const ttlMs = Math.round(req.ttl * 1000)
  const staleMs = Math.round((req.stale ?? 0) * 1000)
  switch (req.contender) {
    case 'cached:rlock':
    case 'cached:rlock-stale': {
      const client = await rlockClient()
      const options = { ttlMs, ...(req.contender === 'cached:rlock-stale' ? { staleMs } : {}) }
      return (key) => client.cached(key, load, options)
    }
    case 'cached:bentocache':
    case 'cached:bentocache-grace': {
      const bento = await bentocache()
      // bentocache's grace is how long the entry stays in Redis in all (its
      // physical ttl), the ttl included: the stale window comes after the ttl.
      const grace = req.contender === 'cached:bentocache-grace' ? ttlMs + staleMs : false
      return (key) => bento.getOrSet({ key, factory: load, ttl: ttlMs, grace })
    }
    default:
      throw new Error(`unknown contender ${req.contender}`)
  }
}

// `readers` readers loop on `key` from `start` to `end`, each pausing a
// random 0 to 2 × `pace_ms` between reads (so they do not move in step): one
// record [began, ended, value's t1] per read.
async function read(req) {
  const get = await make(req)
  const rec = []
  let errors = 0
  await sleep(Math.max(0, (req.start - now()) / 1e6))
  await Promise.all(
    Array.from({ length: req.readers }, async () => {
      await sleep(uniform(0, req.pace_ms))
      for (;;) {
        const began = now()
        if (began >= req.end) return
        try {
          rec.push([began, now(), t1Of(await get(req.key))])
        } catch {
          errors++ // counted; the reader goes on
        }
        await sleep(uniform(0, 2 * req.pace_ms))
      }
    }),
  )
  return { rec, errors }
}

// From `start`, `readers` readers share out keys `prefix:0` to
// `prefix:{keys - 1}` in that order, each key read once by this process:
// every process of the block reads the same keys at about the same time.
async function cold(req) {
  const get = await make(req)
  let next = 0
  let errors = 0
  await sleep(Math.max(0, (req.start - now()) / 1e6))
  await Promise.all(
    Array.from({ length: req.readers }, async () => {
      while (next < req.keys) {
        const i = next++
        try {
          await get(`${req.prefix}:${i}`)
        } catch {
          errors++ // counted; the reader goes on
        }
      }
    }),
  )
  return { ended: now(), errors }
}

// `n` reads of `key` one after another (the harness counts what they send).
async function seq(req) {
  const get = await make(req)
  const lat = []
  for (let i = 0; i < req.n; i++) {
    const t = now()
    await get(req.key)
    lat.push(now() - t)
  }
  return { lat }
}

async function main() {
  const ops = { read, cold, seq }
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
