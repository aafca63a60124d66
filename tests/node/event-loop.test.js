'use strict'
// A wait never blocks the event loop: timers, sockets and worker threads go on
// while a lock is awaited, although the JS thread itself drives the wait
// whenever the loop would otherwise sleep.

const assert = require('node:assert/strict')
const net = require('node:net')
const path = require('node:path')
const { test } = require('node:test')
const { Worker } = require('node:worker_threads')
const { Client } = require('../../node/index.js')
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
  // And on time: the JS thread drives the wait only until the next timer is due.
  const median = gaps.sort((a, b) => a - b)[Math.floor(gaps.length / 2)]
  assert.ok(median < 30, `median gap between 20 ms ticks ${median} ms`)
  await holder.release()
})

test('sockets keep flowing while acquire() waits with no timer pending, new connections too', { timeout: 20000 }, async () => {
  // No JS timer runs during the wait, so only the loop's I/O can end each
  // turn of the JS thread driving the wait at once; a turn that missed it
  // would hold the echo for its full length (500 ms). The server and its
  // connection are made while the wait goes on (libuv hands the watches of
  // new sockets to its poller only as it polls: the drive steps aside while
  // any are waiting).
  const holder = await Client.connect(env.redis.url)
  const held = holder.lock('io-during-wait', { ttlMs: 30000 })
  await held.acquire()
  const waiter = env.client.lock('io-during-wait')
  let acquired = false
  const waiting = waiter.acquire().then(() => {
    acquired = true
  })

  const server = net.createServer((socket) => socket.on('data', (d) => socket.write(d)))
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  const started = performance.now()
  const socket = net.connect(server.address().port, '127.0.0.1')
  await new Promise((resolve) => socket.once('connect', resolve))
  const stamps = [performance.now()]
  await new Promise((resolve) => {
    socket.on('data', () => {
      stamps.push(performance.now())
      if (stamps.length === 200) resolve()
      else socket.write('x')
    })
    socket.write('x')
  })
  assert.equal(acquired, false, 'the waiter got the lock while it was held')
  assert.ok(stamps[0] - started < 150, `connecting took ${(stamps[0] - started).toFixed(1)} ms`)
  const gaps = stamps.slice(1).map((t, i) => t - stamps[i])
  assert.ok(Math.max(...gaps) < 150, `longest echo round trip ${Math.max(...gaps).toFixed(1)} ms`)

  await held.release()
  await waiting
  await waiter.release()
  socket.destroy()
  server.close()
  await holder.close()
})

test('a loop of awaited calls still lets timers run: polling tryAcquire() sees a timer release the lock', { timeout: 20000 }, async () => {
  // Each call finishes on the JS thread and may settle at once; a loop of
  // them must still give the event loop its turns, or the timer that
  // releases the lock would never fire.
  const held = env.client.lock('poll-for-timer')
  await held.acquire()
  setTimeout(() => held.release(), 50)
  const poller = env.client.lock('poll-for-timer')
  let tries = 0
  while (!(await poller.tryAcquire())) tries++
  assert.ok(tries > 0)
  await poller.release()
})

test('worker threads wait on locks beside the main thread, and end cleanly', { timeout: 20000 }, async () => {
  const holder = env.client.lock('threads')
  await holder.acquire()
  const workers = [0, 1].map(
    () =>
      new Worker(path.join(__dirname, 'wait-worker.js'), {
        workerData: { url: env.redis.url, name: 'threads' },
      }),
  )
  const results = workers.map(
    (w) =>
      new Promise((resolve, reject) => {
        w.once('message', resolve)
        w.once('error', reject)
      }),
  )
  const exits = workers.map((w) => new Promise((resolve) => w.once('exit', resolve)))
  // Both workers are waiting once each has reported so.
  const ready = await Promise.all(results)
  assert.deepEqual(ready, ['waiting', 'waiting'])
  const main = env.client.lock('threads')
  const mainTurn = main.acquire().then(() => main.release())
  await holder.release()
  // The two workers and the main thread each take the lock in turn and
  // release it; each worker then exits.
  assert.deepEqual(await Promise.all(exits), [0, 0])
  await mainTurn
})
