'use strict'
// Demo requests from Node: one process, one promise per request.
//
// Each request asks `client.cached` for the product. On a miss one caller,
// across every process and language, runs the loader (the slow database
// below) while the others wait for the value it stores; within the stale
// window the old value comes back at once and the loader refreshes it in the
// background.
//
// Run by demo/run.py, which sets the environment, with two arguments: how many
// promises request at once in act 1, how many keep requesting in act 2. It says
// `ready`, then takes commands on stdin, one a line:
//
//   burst    every act-1 promise requests once, all at the same moment
//   steady   each act-2 promise requests every DEMO_INTERVAL s, until `stop`
//
// and prints one JSON record per request as it ends, then `done`.

const readline = require('node:readline')
const { setTimeout: sleep } = require('node:timers/promises')
const { Client } = require('../node/index.js')
const resp = require('./resp.js')

const env = process.env
const KEY = env.DEMO_KEY
// early: 0, no early refresh, so that in act 2 the entry does expire.
const OPTIONS = { ttlMs: Number(env.DEMO_TTL) * 1000, staleMs: Number(env.DEMO_STALE) * 1000, early: 0 }
const DB_DELAY_MS = Number(env.DEMO_DB_DELAY) * 1000
const INTERVAL_MS = Number(env.DEMO_INTERVAL) * 1000

let serial = 0

/** The query the cache protects. Every call is counted in Redis, and logged
 * with its time and the request that ran it. */
async function slowDatabase(store, request) {
  const startedMs = Date.now()
  const call = await store.command('INCR', env.DEMO_CALLS_KEY)
  await sleep(DB_DELAY_MS)
  const logged = { call, by: request, started_ms: startedMs, ended_ms: Date.now() }
  await store.command('RPUSH', env.DEMO_LOG_KEY, JSON.stringify(logged))
  return { id: 1001, name: 'Mechanical keyboard', price: 129, version: call, loaded_by: request }
}

async function request(client, store, act) {
  serial += 1
  const me = `node-${serial}`
  const startedMs = Date.now()
  const asked = performance.now()
  const value = await client.cached(KEY, () => slowDatabase(store, me), OPTIONS)
  const latencyMs = performance.now() - asked
  // `rlock cached` stores its command's stdout as bytes, a Buffer here;
  // Python and Node store the product as JSON, which comes back as an object.
  const product = Buffer.isBuffer(value) ? JSON.parse(value.toString('utf8')) : value
  const record = { runtime: 'node', act, request: me, started_ms: startedMs, latency_ms: latencyMs, product }
  process.stdout.write(JSON.stringify(record) + '\n')
}

async function steadily(client, store, state) {
  while (!state.stopped) {
    await request(client, store, 2)
    await sleep(INTERVAL_MS)
  }
}

async function main() {
  const [burst, users] = process.argv.slice(2).map(Number)
  // Connected (and the client's tables built) before the start signal, so
  // the requests race on the cache entry and not on setting up.
  const client = await Client.connect(env.REDIS_URL)
  const store = await resp.connect(env.REDIS_URL)
  await client.lock(KEY).isLocked()
  const state = { stopped: false }
  let steady = []
  process.stdout.write('ready\n')
  for await (const command of readline.createInterface({ input: process.stdin })) {
    if (command === 'burst') {
      await Promise.all(Array.from({ length: burst }, () => request(client, store, 1)))
      process.stdout.write('done\n')
    } else if (command === 'steady') {
      steady = Array.from({ length: users }, () => steadily(client, store, state))
    } else if (command === 'stop') {
      state.stopped = true
      await Promise.all(steady)
      process.stdout.write('done\n')
    }
  }
  state.stopped = true
  await Promise.all(steady)
  store.close()
  await client.close()
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
