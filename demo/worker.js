'use strict'
// Demo requests from Node: one process, one promise per request.
//
// Each request does what a web handler does with a cache in front of a slow
// database: read the cache; on a miss take the lock, re-check the cache,
// rebuild it if still missing, release. It prints one JSON record per request.
// Run by demo/run.py, which sets the environment.

const readline = require('node:readline')
const { setTimeout: sleep } = require('node:timers/promises')
const { Client } = require('../node/index.js')
const resp = require('./resp.js')

const URL = process.env.REDIS_URL
const NAME = process.env.DEMO_LOCK
const CACHE_KEY = process.env.DEMO_CACHE_KEY
const REBUILDS_KEY = process.env.DEMO_REBUILDS_KEY
const DB_DELAY_MS = Number(process.env.DEMO_DB_DELAY) * 1000

/** The expensive query the cache protects; every call is counted in Redis. */
async function slowDatabase(store, fence) {
  await store.command('INCR', REBUILDS_KEY)
  await sleep(DB_DELAY_MS)
  return JSON.stringify({ id: 1001, name: 'Mechanical keyboard', price: 129, rebuilt_by: 'node', fence })
}

async function request(client, store) {
  if ((await store.command('GET', CACHE_KEY)) !== null) {
    return { runtime: 'node', outcome: 'hit', wait_ms: null, fence: null }
  }
  const asked = performance.now()
  return client.using(NAME, { ttlMs: 10000, timeoutMs: 30000 }, async (signal, lock) => {
    const waitMs = performance.now() - asked
    const fence = lock.fencingToken
    let outcome = 'waited'
    if ((await store.command('GET', CACHE_KEY)) === null) {
      // Jittered TTL: entries filled together must not all expire together.
      const ttl = 300 + Math.floor(Math.random() * 61)
      await store.command('SET', CACHE_KEY, await slowDatabase(store, fence), 'EX', ttl)
      outcome = 'rebuilt'
    }
    return { runtime: 'node', outcome, wait_ms: waitMs, fence }
  })
}

async function main() {
  const count = Number(process.argv[2])
  // Connect before the start signal, so the requests race on the lock and not
  // on connection set-up.
  const client = await Client.connect(URL)
  const store = await resp.connect(URL)
  await client.lock(NAME).isLocked()
  const lines = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]()
  process.stdout.write('ready\n')
  const { value } = await lines.next()
  if (value !== 'go') return
  const records = await Promise.all(Array.from({ length: count }, () => request(client, store)))
  for (const r of records) process.stdout.write(JSON.stringify(r) + '\n')
  store.close()
  await client.close()
  process.stdin.destroy()
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
