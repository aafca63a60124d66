'use strict'
// A client nobody references any more is freed: once the garbage collector
// took it and its locks, Redis sees none of its connections, whatever its
// locks went through (a wait that timed out or was aborted in line, a
// handoff through the line, renewals, a watched signal). Runs in a child
// started with --expose-gc, whose connections the test counts from outside.

const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const path = require('node:path')
const readline = require('node:readline')
const { test } = require('node:test')
const { serve, waitFor } = require('./helper.js')

const entry = path.join(__dirname, '..', '..', 'node', 'index.js')

const env = serve({ client: false })

/**
 * Runs `body` (an async function's source, given the URL and a lock name that
 * another client of the child holds) in a child with --expose-gc. Resolves
 * with the connections counted before the body ran and once it had dropped
 * everything (the child then collects garbage until it is killed).
 */
let runs = 0

async function dropped(body) {
  // Each child its own name: a killed child's lock stays for its lease.
  const name = `dropped-${++runs}`
  const script = `
    const { Client } = require(${JSON.stringify(entry)})
    const { execFileSync } = require('node:child_process')
    // Resolves once a waiter of this child stands in the line of that name.
    const inLine = async (url, name) => {
      for (const deadline = Date.now() + 5000; Date.now() < deadline; ) {
        const n = execFileSync('redis-cli', ['-u', url, 'LLEN', 'rlock:{' + name + '}:queue'])
        if (String(n).trim() === '1') return
        await new Promise((resolve) => setTimeout(resolve, 10))
      }
      throw new Error('the waiter never stood in line')
    }
    ;(async (url) => {
      const rival = await Client.connect(url)
      const held = rival.lock(${JSON.stringify(name)})
      await held.acquire()
      globalThis.kept = [rival, held] // the one client that must stay
      console.log('ready')
      await new Promise((resolve) => process.stdin.once('data', resolve))
      await (${body})(url, ${JSON.stringify(name)}, held)
      console.log('dropped')
      setInterval(() => global.gc(), 20)
    })(${JSON.stringify(env.redis.url)}).catch((e) => { console.error(e); process.exit(3) })
  `
  const child = spawn(process.execPath, ['--expose-gc', '-e', script], { stdio: ['pipe', 'pipe', 'inherit'] })
  const lines = readline.createInterface({ input: child.stdout })[Symbol.asyncIterator]()
  const next = async (expected) => {
    const { value } = await Promise.race([
      lines.next(),
      new Promise((_, reject) => setTimeout(() => reject(new Error(`no "${expected}" from the child`)), 10000)),
    ])
    assert.equal(value, expected)
  }
  try {
    await next('ready')
    const baseline = await env.redis.connections()
    child.stdin.write('go\n')
    await next('dropped')
    let last
    await waitFor(async () => (last = await env.redis.connections()) === baseline, {
      timeoutMs: 8000,
      what: `the dropped client's connections closed (baseline ${baseline})`,
    }).catch((e) => {
      throw new Error(`${e.message}: ${last} open`)
    })
  } finally {
    child.kill('SIGKILL')
  }
}

test('ten clients that queued and were dropped leave no connection', async () => {
  await dropped(`async (url, name) => {
    for (let i = 0; i < 10; i++) {
      const client = await Client.connect(url)
      await client.lock(name, { queueAfterMs: 0, timeoutMs: 50, fair: i % 2 === 1 }).acquire().catch(() => {})
    }
  }`)
})

test('a dropped client whose wait was aborted in line is freed', async () => {
  await dropped(`async (url, name) => {
    const client = await Client.connect(url)
    const controller = new AbortController()
    const waiting = client.lock(name, { queueAfterMs: 0 }).acquire({ signal: controller.signal })
    await inLine(url, name)
    controller.abort(new Error('stop'))
    await waiting.catch(() => {})
  }`)
})

test('a dropped client that was handed the lock through the line, and watched it, is freed', async () => {
  await dropped(`async (url, name, held) => {
    const client = await Client.connect(url)
    const lock = client.lock(name, { fair: true, ttlMs: 300 })
    const waiting = lock.acquire()
    await inLine(url, name)
    await held.release()
    await waiting
    void lock.signal // a lost-lease watch
    await new Promise((resolve) => setTimeout(resolve, 600)) // held for two leases: renewed
    if (lock.lost) throw new Error('not renewed')
    await lock.release()
  }`)
})
