'use strict'
// A line-driven lock worker: the Node side of tests/interop.
//
// Connects to $REDIS_URL, then answers one line per command read on stdin
// (the protocol of core/examples/interop_worker.rs):
//
//   acquire LOCK NAME TTL_MS WAIT_MS  -> ok FENCE | busy | upgrade | invalid MESSAGE
//   release LOCK NAME                 -> ok | err MESSAGE
//   count NAME KEY N PARALLEL         -> ok SEEN:FENCE ...
//   cached KEY COUNTER GATE LOADER    -> ready, then after a `go` line:
//                                        loaded|got TYPE HEX | failed MESSAGE
//                                        | loader-failed KEY MESSAGE | timeout
//   invalidate KEY                    -> ok true|false
//
// LOCK is which lock of NAME: `mutex`, `read` or `write` (the sides of its
// read-write lock), or `semaphore:N` (one permit of its semaphore of N
// permits). WAIT_MS 0 is one attempt. `upgrade`: a write asked while holding
// only the read; `invalid`: the arguments were refused (a semaphore's size
// unlike its holders'), MESSAGE saying why.
//
// `acquire` and `release` act through one handle per lock and name (both
// sides of a read-write lock through one), so acquiring a lock twice nests.
// `count` runs PARALLEL loops, each its own handle (its own owner), each N
// times taking the mutex and incrementing the integer at KEY with a GET then
// a SET; it answers the value each holding read with the fencing token it
// held.
//
// `cached` reads the cache entry KEY (ttl 60 s) as worker.py's does: after
// `ready` and a `go` line, its loader INCRs COUNTER, waits for an item on the
// list GATE (unless `-`), then returns what LOADER says (`bytes:HEX` a
// Buffer, `text:HEX` a string, `json:HEX` that JSON decoded, `none` null, or
// `fail:HEX` throws an Error with that message); the answer names the value
// as `bytes HEX`, `text HEX`, `json HEX` or `none`.

const readline = require('node:readline')
const { setImmediate: yieldToOthers } = require('node:timers/promises')
const { Client, LockError, CacheLoaderError, LockTimeoutError } = require('../../node/index.js')
const resp = require('../../demo/resp.js')

class LoaderFailure extends Error {}

// A value as the answer of `cached` names it.
function described(value) {
  if (value === undefined || value === null) return 'none'
  if (Buffer.isBuffer(value)) return `bytes ${value.toString('hex')}`
  if (typeof value === 'string') return `text ${Buffer.from(value).toString('hex')}`
  return `json ${Buffer.from(JSON.stringify(value)).toString('hex')}`
}

async function main() {
  const client = await Client.connect()
  const data = await resp.connect(process.env.REDIS_URL)
  const locks = new Map()
  const input = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]()
  const nextLine = async () => (await input.next()).value

  // Resolves once an item is popped off the list `gate`.
  const opened = async (gate) => {
    const deadline = Date.now() + 20000
    while ((await data.command('LPOP', gate)) === null) {
      if (Date.now() > deadline) throw new Error(`nobody pushed to ${gate} within 20 s`)
      await new Promise((resolve) => setTimeout(resolve, 5))
    }
  }

  const loader = (counter, gate, spec, ran) => async () => {
    const [kind, arg = ''] = spec.split(':')
    const raw = Buffer.from(arg, 'hex')
    ran.push(true)
    await data.command('INCR', counter)
    if (gate !== '-') await opened(gate)
    if (kind === 'fail') throw new LoaderFailure(raw.toString('utf8'))
    if (kind === 'text') return raw.toString('utf8')
    if (kind === 'json') return JSON.parse(raw.toString('utf8'))
    return kind === 'none' ? null : raw
  }

  // This worker's Lock of `which` on `name`, made on first use.
  const handle = (which, name, ttlMs) => {
    const key = `${which} ${name}`
    if (!locks.has(key)) {
      const options = { ttlMs: Number(ttlMs) }
      if (which === 'mutex') {
        locks.set(key, client.lock(name, options))
      } else if (which === 'read' || which === 'write') {
        const rw = client.rwLock(name, options)
        locks.set(`read ${name}`, rw.read).set(`write ${name}`, rw.write)
      } else if (which.startsWith('semaphore:')) {
        locks.set(key, client.semaphore(name, { ...options, permits: Number(which.split(':')[1]) }))
      } else {
        throw new Error(`unknown lock ${JSON.stringify(which)}`)
      }
    }
    return locks.get(key)
  }

  const commands = {
    async acquire(which, name, ttlMs, waitMs) {
      const lock = handle(which, name, ttlMs)
      const wait = Number(waitMs)
      try {
        if (wait === 0) return (await lock.tryAcquire()) ? `ok ${lock.fencingToken}` : 'busy'
        await lock.acquire({ signal: AbortSignal.timeout(wait) })
        return `ok ${lock.fencingToken}`
      } catch (err) {
        if (err.name === 'TimeoutError') return 'busy'
        if (err.code === 'ERR_LOCK_UPGRADE') return 'upgrade'
        if (err instanceof RangeError) return `invalid ${err.message}`
        throw err
      }
    },
    async release(which, name) {
      const key = `${which} ${name}`
      if (!locks.has(key)) return 'err never acquired here'
      await locks.get(key).release()
      return 'ok'
    },
    async count(name, key, n, parallel) {
      const seen = []
      const loop = async () => {
        const lock = client.lock(name, { timeoutMs: 60000 })
        for (let i = 0; i < Number(n); i++) {
          await lock.acquire()
          const value = Number((await data.command('GET', key)) ?? 0)
          // Let the other loops run between GET and SET: only the lock keeps
          // the increment exact.
          await yieldToOthers()
          await data.command('SET', key, value + 1)
          seen.push(`${value}:${lock.fencingToken}`)
          await lock.release()
        }
      }
      await Promise.all(Array.from({ length: Number(parallel) }, loop))
      return `ok ${seen.join(' ')}`
    },
    async cached(key, counter, gate, spec) {
      process.stdout.write('ready\n')
      if ((await nextLine()) !== 'go') return 'err expected go'
      const ran = []
      try {
        const value = await client.cached(key, loader(counter, gate, spec, ran), { ttlMs: 60000 })
        return `${ran.length ? 'loaded' : 'got'} ${described(value)}`
      } catch (err) {
        if (err instanceof LoaderFailure) return `failed ${err.message}`
        if (err instanceof CacheLoaderError) return `loader-failed ${err.key} ${err.message}`
        if (err instanceof LockTimeoutError) return 'timeout'
        throw err
      }
    },
    async invalidate(key) {
      return `ok ${await client.invalidate(key)}`
    },
  }

  // One iterator over stdin: `cached` reads its `go` line from it too.
  for (let line = await nextLine(); line !== undefined; line = await nextLine()) {
    const [command, ...args] = line.split(/\s+/)
    let reply
    try {
      if (!(command in commands)) throw new Error(`unknown command ${JSON.stringify(line)}`)
      reply = await commands[command](...args)
    } catch (err) {
      reply = `err ${err instanceof LockError ? err.code : err.name}: ${err.message}`
    }
    process.stdout.write(reply + '\n')
  }
  data.close()
  await client.close()
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
