'use strict'
// A Node worker of the fault suite: the same protocol and records as
// worker.py (see its docstring), through `client.using()` (a mutex) or the
// `using()` of a read-write lock's side or a semaphore (the config's `kind`
// and `permits`, as kinds.py reads them). Stamps come from
// process.hrtime.bigint(), which is CLOCK_MONOTONIC, as Python's are. The
// config's `url` may be a list (Redlock, or with `cluster: true` a Cluster's
// seeds); `fair: true` waits in line; `until_file` ends each holding once
// that file exists.

const fs = require('node:fs')
const net = require('node:net')
const readline = require('node:readline')
const { Client, LockTimeoutError, LockLostError } = require('../../node/index.js')

const cfg = JSON.parse(process.argv[2])
const now = () => Number(process.hrtime.bigint())
const MS = 1e6
const out = fs.openSync(cfg.records, 'a')
const rec = (fields) => fs.writeSync(out, JSON.stringify({ ...fields, w: cfg.id }) + '\n')
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

// A small seeded generator, so a run can be replayed.
let seed = (cfg.seed ?? 1) >>> 0 || 1
function random() {
  seed ^= seed << 13
  seed ^= seed >>> 17
  seed ^= seed << 5
  return (seed >>> 0) / 4294967296
}
const uniform = ([lo, hi] = [0, 0]) => lo + (hi - lo) * random()
const pick = (list) => list[Math.floor(random() * list.length)]

const stdin = readline.createInterface({ input: process.stdin })
const lines = stdin[Symbol.asyncIterator]()
const nextLine = async () => (await lines.next()).value

class Storage {
  constructor(path) {
    this.socket = net.connect(path)
    this.pending = []
    let buffered = ''
    this.socket.on('data', (data) => {
      buffered += data
      let at
      while ((at = buffered.indexOf('\n')) >= 0) {
        this.pending.shift()(buffered.slice(0, at) === 'ok')
        buffered = buffered.slice(at + 1)
      }
    })
  }

  write(name, token) {
    return new Promise((resolve) => {
      this.pending.push(resolve)
      this.socket.write(`${name} ${token} ${cfg.id}\n`)
    })
  }
}

// Whether a holding is over: at `end`, or once the suite created `until_file`.
const over = (t, end) => (cfg.until_file ? fs.existsSync(cfg.until_file) : t >= end)
const lockOptions = () => ({ ttlMs: cfg.ttl_ms, timeoutMs: cfg.timeout_ms ?? undefined, fair: cfg.fair ?? false })

// A round's name and kind, as kinds.py's choose() picks them: the kind as
// records carry it (nothing for a mutex).
function choose() {
  const name = pick(cfg.names)
  const kind = Array.isArray(cfg.kind) ? pick(cfg.kind) : (cfg.kind ?? 'mutex')
  if (kind === 'mutex') return [name, {}]
  return [name, kind === 'semaphore' ? { kind, permits: cfg.permits } : { kind }]
}

// Only holders alone write to the fenced storage (kinds.py's ALONE).
const writes = (kind) => ['mutex', 'write'].includes(kind.kind ?? 'mutex')

// Runs `fn(signal, lock)` holding the lock of `kind` on `name`.
function using(client, name, kind, options, fn) {
  if (kind.kind === 'semaphore') return client.semaphore(name, { ...options, permits: kind.permits }).using(fn)
  if (kind.kind === 'read' || kind.kind === 'write') return client.rwLock(name, options)[kind.kind].using(fn)
  return client.using(name, options, fn)
}

const errorOut = (e) => `error:${e?.name}:${e?.message}`.slice(0, 300)

async function runRounds(client, storage) {
  const options = lockOptions()
  const until = now() + (cfg.for_ms ?? Infinity) * MS
  for (let n = 0; n < (cfg.rounds ?? Infinity) && now() < until; n++) {
    const [name, kind] = choose()
    rec({ e: 'wait', n: name, t: now(), ...kind })
    let tok = null
    try {
      await using(client, name, kind, options, async (signal, lock) => {
        tok = lock.fencingToken
        const start = now()
        rec({ e: 'enter', n: name, tok, t: start, ...kind })
        signal.addEventListener('abort', () => rec({ e: 'lost', n: name, tok, t: now(), why: signal.reason?.message }))
        const end = start + uniform(cfg.hold_ms) * MS
        for (;;) {
          const t = now()
          if (signal.aborted) return
          rec({ e: 'step', n: name, tok, t, ...(writes(kind) ? { ok: await storage.write(name, tok) } : {}) })
          if (over(t, end)) return
          await sleep(cfg.step_ms ?? 5)
        }
      })
      rec({ e: 'exit', n: name, tok, t: now(), out: 'released' })
    } catch (e) {
      if (e instanceof LockTimeoutError) rec({ e: 'waited', n: name, t: now(), out: 'timeout' })
      else if (e instanceof LockLostError) rec({ e: 'exit', n: name, tok, t: now(), out: 'lost' })
      else rec({ e: tok === null ? 'waited' : 'exit', n: name, tok, t: now(), out: errorOut(e) })
    }
    const gap = uniform(cfg.gap_ms)
    if (gap) await sleep(gap)
  }
}

async function runCycles(client) {
  const options = lockOptions()
  const locks = new Map(cfg.names.map((n) => [n, client.lock(n, options)]))
  const slowEvery = cfg.slow_every ?? 0
  const rows = []
  for (let i = 0; i < cfg.cycles; i++) {
    const name = pick(cfg.names)
    const lock = locks.get(name)
    const t0 = now()
    try {
      await lock.acquire()
    } catch (e) {
      rows.push({ e: 'waited', n: name, t0, t: now(), out: e instanceof LockTimeoutError ? 'timeout' : errorOut(e) })
      continue
    }
    const t1 = now()
    const tok = lock.fencingToken
    if (slowEvery && i % slowEvery === slowEvery - 1) await sleep((cfg.ttl_ms / 3) * (0.9 + 0.2 * random()))
    const t2 = now()
    let status = 'released'
    try {
      await lock.release()
    } catch (e) {
      status = errorOut(e)
    }
    rows.push({ e: 'cycle', n: name, tok, t0, t1, t2, t: now(), out: status })
  }
  for (const row of rows) rec(row)
}

async function main() {
  const client = await Client.connect(cfg.url, { cluster: cfg.cluster ?? false })
  const storage = new Storage(cfg.storage)
  await client.lock(cfg.names[0]).isLocked()
  console.log('ready')
  if ((await nextLine()) !== 'go') throw new Error('expected go')
  if (cfg.cycles !== undefined) {
    await runCycles(client)
    console.log('cycled')
    await nextLine()
  } else {
    await runRounds(client, storage)
  }
  await client.close()
  storage.socket.end()
  stdin.close()
  fs.closeSync(out)
  console.log('done')
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
