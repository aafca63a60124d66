'use strict'
// A line-driven lock worker: the Node side of tests/interop.
//
// Connects to $REDIS_URL, then answers one line per command read on stdin
// (the protocol of core/examples/interop_worker.rs):
//
//   acquire NAME TTL_MS WAIT_MS     -> ok FENCE | busy      (WAIT_MS 0: one attempt)
//   release NAME                    -> ok | err MESSAGE
//   count NAME KEY N PARALLEL       -> ok SEEN:FENCE ...
//
// `acquire` and `release` act through one handle per name, so acquiring a
// name twice nests. `count` runs PARALLEL loops, each its own handle (its own
// owner), each N times taking the lock and incrementing the integer at KEY
// with a GET then a SET; it answers the value each holding read with the
// fencing token it held.

const readline = require('node:readline')
const { setImmediate: yieldToOthers } = require('node:timers/promises')
const { Client, LockError } = require('../../node/index.js')
const resp = require('../../demo/resp.js')

async function main() {
  const client = await Client.connect()
  const data = await resp.connect(process.env.REDIS_URL)
  const locks = new Map()

  const commands = {
    async acquire(name, ttlMs, waitMs) {
      if (!locks.has(name)) locks.set(name, client.lock(name, { ttlMs: Number(ttlMs) }))
      const lock = locks.get(name)
      const wait = Number(waitMs)
      if (wait === 0) return (await lock.tryAcquire()) ? `ok ${lock.fencingToken}` : 'busy'
      try {
        await lock.acquire({ signal: AbortSignal.timeout(wait) })
        return `ok ${lock.fencingToken}`
      } catch (err) {
        if (err.name === 'TimeoutError') return 'busy'
        throw err
      }
    },
    async release(name) {
      if (!locks.has(name)) return 'err never acquired here'
      await locks.get(name).release()
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
