'use strict'
// The Node worker of the memory soak: one loop of one kind against
// $REDIS_URL, paused at every checkpoint so the driver can read this process'
// memory, threads and connections from outside (see test_memory.py; the
// protocol is worker.py's).
//
//   node --expose-gc worker.js MODE WARM_UP OPERATIONS CHECKPOINTS
//
// Modes (4 loops of promises on one client, one lock name):
//
//   one-handle     all 4 on one handle (one owner: their acquisitions nest)
//   handles        a handle each, the default lock (queues waiters after 10 ms)
//   handles-fair   a handle each, fair
//   using          client.using() for every acquisition: a new handle each
//                  time, its AbortSignal watched while held
//   abort          a handle each, whose waits end unsatisfied: half aborted
//                  by an AbortSignal, half by the lock's timeoutMs

const readline = require('node:readline')
const { randomUUID } = require('node:crypto')
const { setTimeout: sleep } = require('node:timers/promises')
const { Client, LockTimeoutError } = require('../../node/index.js')

const PARALLEL = 4
// In the abort mode a holder keeps the lock longer than the others wait.
const HOLD_MS = 2
const WAIT_MS = 1

const input = readline.createInterface({ input: process.stdin })
const lines = input[Symbol.asyncIterator]()

async function pause(line) {
  process.stdout.write(line + '\n')
  const next = await lines.next()
  if (next.done) throw new Error('the driver went away')
}

/** The options of loop `i`'s lock. */
function lockOptions(mode, i) {
  if (mode === 'handles-fair') return { fair: true }
  // One name, waiters of both kinds in one line.
  if (mode === 'abort') return i % 2 ? { timeoutMs: WAIT_MS, queueAfterMs: 0 } : { fair: true }
  return {}
}

function makeLocks(client, mode, name) {
  if (mode === 'one-handle') {
    const lock = client.lock(name)
    return Array(PARALLEL).fill(lock)
  }
  return Array.from({ length: PARALLEL }, (_, i) => client.lock(name, lockOptions(mode, i)))
}

async function cycles(client, mode, lock, i, n) {
  let acquired = 0
  let timeouts = 0
  for (let k = 0; k < n; k++) {
    if (mode === 'using') {
      // The lock taken per request, as a server would: a new handle (a new
      // owner) each time, watched for loss (its AbortSignal) while held.
      await client.using(lock.name, lockOptions(mode, i), async (signal) => {
        if (signal.aborted) throw signal.reason
      })
      acquired++
      continue
    }
    if (mode !== 'abort') {
      await lock.acquire()
      await lock.release()
      acquired++
      continue
    }
    try {
      await (i % 2 ? lock.acquire() : lock.acquire({ signal: AbortSignal.timeout(WAIT_MS) }))
    } catch (err) {
      if (err instanceof LockTimeoutError || err.name === 'TimeoutError') {
        timeouts++
        continue
      }
      throw err
    }
    await sleep(HOLD_MS)
    await lock.release()
    acquired++
  }
  return [acquired, timeouts]
}

async function run(mode, perUnit, warm) {
  const client = await Client.connect(process.env.REDIS_URL)
  const locks = makeLocks(client, mode, `soak:${randomUUID()}`)
  const counts = { ops: 0, acquired: 0, timeouts: 0 }
  for (const n of [warm, ...perUnit]) {
    const done = await Promise.all(locks.map((lock, i) => cycles(client, mode, lock, i, n)))
    for (const [a, t] of done) {
      counts.ops += a + t
      counts.acquired += a
      counts.timeouts += t
    }
    // Readings count what is retained, not garbage the collector has not
    // come to yet (V8 collects lazily).
    global.gc()
    const heapKb = process.memoryUsage().heapUsed >> 10
    await pause(`at ${counts.ops} ${counts.acquired} ${counts.timeouts} js=${heapKb}`)
  }
  await client.close()
}

// What the process keeps once any client was used: the runtime and its
// threads. A function of its own: a variable of main's would keep the client
// reachable until main returns.
async function firstUse(mode) {
  const client = await Client.connect(process.env.REDIS_URL)
  await cycles(client, mode === 'abort' ? 'handles' : mode, makeLocks(client, mode, `soak:${randomUUID()}`)[0], 0, 10)
  await client.close()
}

async function main() {
  const mode = process.argv[2]
  const [warmUp, total, checkpoints] = process.argv.slice(3, 6).map(Number)
  const perUnit = Array(checkpoints).fill(Math.max(1, Math.floor(total / checkpoints / PARALLEL)))
  const warm = Math.max(1, Math.floor(warmUp / PARALLEL))
  await firstUse(mode)
  // Twice: a native object is finalized in the collection after the one
  // that found it unreachable.
  global.gc()
  await sleep(10)
  global.gc()
  await pause('baseline')
  await run(mode, perUnit, warm)
  global.gc()
  await sleep(10)
  global.gc()
  await pause('closed')
  input.close()
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
