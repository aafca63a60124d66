'use strict'
// A Node reader of a cache entry for the fault suite: the same protocol,
// config and records as cache_worker.py (see its docstring), through
// `client.cached()`. Stamps come from process.hrtime.bigint(), which is
// CLOCK_MONOTONIC, as Python's are.

const fs = require('node:fs')
const readline = require('node:readline')
const { Client, CacheLoaderError, LockTimeoutError } = require('../../node/index.js')
const resp = require('../../demo/resp.js')

const cfg = JSON.parse(process.argv[2])
const key = cfg.key
const now = () => Number(process.hrtime.bigint())
const out = fs.openSync(cfg.records, 'a')
const rec = (fields) => fs.writeSync(out, JSON.stringify({ ...fields, w: cfg.id, n: key }) + '\n')
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
// The rebuild lock of the entry (rlock_test_support's CacheKeys).
const rebuildLock = `rlock:{${key}}:rebuild`

async function main() {
  const client = await Client.connect(cfg.url)
  const data = await resp.connect(cfg.url)
  const options = {
    ttlMs: cfg.ttl_ms,
    lockTtlMs: cfg.lock_ttl_ms,
    timeoutMs: cfg.timeout_ms ?? undefined,
    early: 0,
  }
  const load = async () => {
    const tok = Number((await data.command('HGET', rebuildLock, 'fence')) ?? 0)
    rec({ e: 'load', t: now(), tok, pid: process.pid })
    await sleep(cfg.load_ms)
    while (cfg.until_file && !fs.existsSync(cfg.until_file)) await sleep(5)
    rec({ e: 'loaded', t: now(), tok })
    return Buffer.from(`${cfg.id}:${tok}`)
  }

  await client.lock(key).isLocked()
  const stdin = readline.createInterface({ input: process.stdin })
  console.log('ready')
  if ((await stdin[Symbol.asyncIterator]().next()).value !== 'go') throw new Error('expected go')
  for (let i = 0; i < (cfg.reads ?? 1); i++) {
    rec({ e: 'read', t: now() })
    try {
      const got = await client.cached(key, load, options)
      rec({ e: 'got', t: now(), val: got.toString('utf8') })
    } catch (e) {
      let why = `error:${e?.name}:${e?.message}`.slice(0, 300)
      if (e instanceof CacheLoaderError) why = 'loader-failed'
      else if (e instanceof LockTimeoutError) why = 'timeout'
      rec({ e: 'failed', t: now(), out: why })
    }
  }
  await client.close()
  data.close()
  stdin.close()
  fs.closeSync(out)
  console.log('done')
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
