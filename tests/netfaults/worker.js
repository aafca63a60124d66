'use strict'
// The Node worker of the network-fault suite: the same commands and records as
// worker.py (see its docstring). Each task is its own lock handle (a mutex, a
// read-write lock's sides, a semaphore), so its own owner; tasks of one run
// share the process's client. Stamps come from
// process.hrtime.bigint(), which is CLOCK_MONOTONIC, as Python's and Rust's are.

const fs = require('node:fs')
const path = require('node:path')
const readline = require('node:readline')
// The package root, as an application would require it.
const { Client, LockTimeoutError, LockLostError, LockNotOwnedError } = require(path.join(__dirname, '..', '..'))

const now = () => Number(process.hrtime.bigint())
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const clients = new Map()

// A small seeded generator, so a task's holds and gaps replay with its seed.
function generator(seed) {
  let s = seed >>> 0 || 1
  return () => {
    s ^= s << 13
    s ^= s >>> 17
    s ^= s << 5
    return (s >>> 0) / 4294967296
  }
}

// One client per deployment for the life of the process, as an application
// keeps one: faults hit its connections, it reconnects.
async function clientFor(url, cluster) {
  const key = JSON.stringify([url, cluster])
  if (!clients.has(key)) clients.set(key, Client.connect(url, { cluster }))
  return clients.get(key)
}

function outcome(e) {
  if (e instanceof LockLostError) return 'lost'
  if (e instanceof LockNotOwnedError) return 'notowned'
  return `error:${e?.name}:${e?.message}`.slice(0, 300)
}

// The task's lock by side ('read' or 'write'; a mutex or semaphore has one),
// and what an acquisition asks: a semaphore's permits.
function sidesOf(client, task) {
  const options = {
    ttlMs: task.ttl_ms,
    timeoutMs: task.timeout_ms ?? undefined,
    autoRenew: task.auto_renew,
    fair: task.fair,
  }
  if (task.kind === 'rw') {
    const rw = client.rwLock(task.name, options)
    return { side: (side) => (side === 'read' ? rw.read : rw.write), asks: undefined }
  }
  if (task.kind === 'semaphore') {
    const sem = client.semaphore(task.name, { ...options, permits: task.permits })
    return { side: () => sem, asks: { permits: task.take } }
  }
  const lock = client.lock(task.name, options)
  return { side: () => lock, asks: undefined }
}

async function runTask(client, task, rec) {
  const random = generator(task.seed)
  const uniform = ([lo, hi]) => lo + (hi - lo) * random()
  const { task: k, name } = task
  let sides
  try {
    sides = sidesOf(client, task)
  } catch (e) {
    rec({ e: 'refused', k, n: name, t: now(), what: outcome(e) })
    return
  }
  const { asks } = sides
  // Rounds (`task.rounds`, one owner waiting again with another lease) are
  // the Python and Rust workers': a Node lock's owner is its handle.
  if (task.start_ms) await sleep(task.start_ms)
  for (let i = 0; i < task.acquisitions; i++) {
    const side = task.sides?.[i]
    const lock = sides.side(side ?? 'write')
    const inner = task.nest_read ? sides.side('read') : lock
    rec({ e: 'wait', k, n: name, t: now(), ...(side ? { side } : {}) })
    try {
      await lock.acquire(asks)
    } catch (e) {
      rec({ e: 'waited', k, n: name, t: now(), out: e instanceof LockTimeoutError ? 'timeout' : outcome(e) })
      continue
    }
    const tok = lock.fencingToken
    rec({ e: 'enter', k, n: name, tok, t: now() })
    const hold = uniform(task.hold_ms) * 1e6
    const entered = now()
    const end = entered + hold
    const middle = entered + hold / 2
    let nested = false
    let halfway = false
    // When the nested acquire comes (null: none, or done).
    let nestAt = task.nest ? entered + (task.nest_at_ms ?? 0) * 1e6 : null
    for (;;) {
      if (nestAt !== null && now() >= nestAt) {
        nestAt = null
        try {
          nested = await inner.tryAcquire(asks)
        } catch (e) {
          rec({ e: 'note', k, n: name, t: now(), what: `nested acquire: ${outcome(e)}` })
        }
        rec({ e: 'nested', k, n: name, tok, t: now(), ...(nested ? { re: true } : {}) })
      }
      const t = now()
      if (lock.lost) {
        rec({ e: 'lost', k, n: name, tok, t: now() })
        break
      }
      rec({ e: 'step', k, n: name, tok, t })
      if (t >= end) break
      if (!halfway && t >= middle) {
        halfway = true
        if (nested) {
          nested = false
          try {
            await inner.release()
          } catch (e) {
            rec({ e: 'note', k, n: name, t: now(), what: `nested release: ${outcome(e)}` })
          }
          rec({ e: 'nested', k, n: name, tok, t: now() })
        }
        if (task.extend) {
          try {
            await lock.extend()
          } catch (e) {
            rec({ e: 'note', k, n: name, t: now(), what: `extend: ${outcome(e)}` })
          }
          rec({ e: 'nested', k, n: name, tok, t: now() })
        }
      }
      await sleep(task.step_ms)
    }
    if (task.crash && lock.lost) {
      // A crashed holder never lets go: its lease runs out in Redis.
      rec({ e: 'exit', k, n: name, tok, t: now(), out: 'lost' })
      continue
    }
    rec({ e: 'rel', k, n: name, tok, t: now() })
    let result = 'released'
    try {
      if (nested) await inner.release()
      await lock.release()
    } catch (e) {
      result = outcome(e)
    }
    rec({ e: 'exit', k, n: name, tok, t: now(), out: result })
    const gap = uniform(task.gap_ms)
    if (gap) await sleep(gap)
  }
}

async function run(cmd) {
  const client = await clientFor(cmd.url, cmd.cluster ?? false)
  const fd = fs.openSync(cmd.records, 'a')
  const rec = (fields) => fs.writeSync(fd, JSON.stringify(fields) + '\n')
  await Promise.all(cmd.tasks.map((task) => runTask(client, task, rec)))
  fs.closeSync(fd)
}

async function main() {
  const lines = readline.createInterface({ input: process.stdin })
  console.log(JSON.stringify({ ready: true }))
  for await (const line of lines) {
    const cmd = JSON.parse(line)
    if (cmd.op === 'exit') break
    await run(cmd)
    console.log(JSON.stringify({ done: cmd.run }))
  }
  for (const client of clients.values()) await (await client).close()
  lines.close()
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
