'use strict'
// A line-driven lock worker: the Node side of tests/interop.
//
// Connects to $REDIS_URL, then answers one line per command read on stdin
// (the protocol of core/examples/interop_worker.rs):
//
//   acquire LOCK NAME TTL_MS WAIT_MS  -> ok FENCE | busy | upgrade | invalid MESSAGE
//   release LOCK NAME                 -> ok | err MESSAGE
//   count NAME KEY N PARALLEL         -> ok SEEN:FENCE ...
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

const readline = require('node:readline')
const { setImmediate: yieldToOthers } = require('node:timers/promises')
const { Client, LockError } = require('../../node/index.js')
const resp = require('../../demo/resp.js')

async function main() {
  const client = await Client.connect()
  const data = await resp.connect(process.env.REDIS_URL)
  const locks = new Map()

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
  }

  for await (const line of readline.createInterface({ input: process.stdin })) {
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
