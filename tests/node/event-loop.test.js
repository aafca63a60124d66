'use strict'
// Waiting happens off the JS thread: timers keep running while a lock is awaited.

const assert = require('node:assert/strict')
const { test } = require('node:test')
const { serve } = require('./helper.js')

const env = serve()

test('the event loop is never blocked while acquire() waits: a setInterval keeps ticking', async () => {
  const holder = env.client.lock('busy')
  await holder.acquire()
  const waiter = env.client.lock('busy', { timeoutMs: 1000 })

  const ticks = []
  const interval = setInterval(() => ticks.push(Date.now()), 20)
  const start = Date.now()
  const err = await waiter.acquire().catch((e) => e)
  const waited = Date.now() - start
  clearInterval(interval)

  assert.equal(err.code, 'ERR_LOCK_TIMEOUT')
  // A 20 ms interval over a ~1000 ms wait ticks about 50 times; a blocked
  // loop would tick at most once or twice.
  assert.ok(ticks.length >= 25, `${ticks.length} ticks in ${waited} ms`)
  const gaps = ticks.slice(1).map((t, i) => t - ticks[i])
  assert.ok(Math.max(...gaps) < 250, `longest gap between ticks ${Math.max(...gaps)} ms`)
  await holder.release()
})
