'use strict'
// The read-write lock: any number of readers or one writer. Its sides are
// Locks of one owner (the handle, or a using() scope), so they wait, renew,
// nest and report a loss as the mutex does; writing while holding only read
// is refused at once, and a waiting writer makes new readers wait behind it.

const assert = require('node:assert/strict')
const { test } = require('node:test')
const { Lock, LockLostError, LockTimeoutError, LockUpgradeError } = require('../../node/index.js')
const { serve, waitFor, aborted, within } = require('./helper.js')

const env = serve()

const key = (name) => `rlock:{${name}}:rwlock`
const inLine = async (name) => Number(await env.redis.cli('LLEN', `${key(name)}:queue`))

test('readers share it, each with its own fencing token; a writer waits for them all', async () => {
  const readers = [0, 1, 2].map(() => env.client.rwLock('share', { timeoutMs: 0 }))
  for (const r of readers) await r.read.acquire()
  const tokens = readers.map((r) => r.read.fencingToken)
  assert.equal(new Set(tokens).size, 3, `every acquisition its own token: ${tokens}`)
  const writer = env.client.rwLock('share', { timeoutMs: 0 })
  await assert.rejects(writer.write.acquire(), LockTimeoutError)
  assert.equal(await writer.write.isLocked(), true, 'readers inside: a write would wait')
  assert.equal(await writer.read.isLocked(), false, 'no writer inside: a read would not')
  for (const r of readers) await r.read.release()
  assert.equal(await writer.write.tryAcquire(), true)
  assert.ok(writer.write.fencingToken > Math.max(...tokens))
  assert.equal(await env.client.rwLock('share').read.tryAcquire(), false, 'a writer inside keeps readers out')
  await writer.write.release()
  assert.equal(await env.redis.cli('EXISTS', key('share')), '0')
})

test('never a writer with anyone else inside, with eight handles side by side', async () => {
  // Readers count 1 each, a writer 1000: more than 1000 is a writer with
  // company. (How many readers share depends on timing here: that they do is
  // the first test's promise.)
  let inside = 0
  let most = 0
  const worker = async (i) => {
    const rw = env.client.rwLock('checked', { timeoutMs: 20000 })
    const [side, weight] = i % 4 === 0 ? [rw.write, 1000] : [rw.read, 1]
    for (let round = 0; round < 10; round++) {
      await side.acquire()
      inside += weight
      most = Math.max(most, inside)
      // Round trips to Redis: time for any other handle to get in if it could.
      for (let k = 0; k < 2; k++) assert.equal(await side.isOwned(), true)
      inside -= weight
      await side.release()
    }
  }
  await within(Promise.all(Array.from({ length: 8 }, (_, i) => worker(i))), 60000, 'the workers')
  assert.ok(most <= 1000, `a writer with someone else inside (${most})`)
  assert.equal(await env.redis.cli('EXISTS', key('checked')), '0')
})

test('writing while this owner holds only read rejects LockUpgradeError at once, and the read stays', async () => {
  const rw = env.client.rwLock('upgrade') // no timeoutMs: a wait would be for ever
  await rw.read.acquire()
  const err = await within(rw.write.acquire().catch((e) => e), 2000, 'the upgrade')
  assert.ok(err instanceof LockUpgradeError, String(err))
  assert.equal(err.code, 'ERR_LOCK_UPGRADE')
  assert.match(err.message, /upgrade/)
  assert.equal(await rw.read.isOwned(), true)
  // The same owner through a using() scope: a handle made in its flow.
  await rw.read.release()
  await rw.read.using(async () => {
    const inScope = env.client.rwLock('upgrade')
    await assert.rejects(within(inScope.write.acquire(), 2000, 'the upgrade in scope'), LockUpgradeError)
  })
  assert.equal(await env.redis.cli('EXISTS', key('upgrade')), '0')
})

test('a downgrade (write, read inside it, release the write) keeps reading, and no writer gets in between', async () => {
  const rw = env.client.rwLock('downgrade', { timeoutMs: 0 })
  await rw.write.acquire()
  await rw.read.acquire() // nests inside this owner's write
  const readToken = rw.read.fencingToken
  assert.ok(readToken > rw.write.fencingToken, 'the read is an acquisition of its own')
  const other = env.client.rwLock('downgrade', { timeoutMs: 10000, queueAfterMs: 0 })
  const writing = other.write.acquire()
  await waitFor(async () => (await inLine('downgrade')) === 1, { what: 'the other writer in line' })
  await rw.write.release()
  assert.equal(await rw.read.isOwned(), true, 'still reading')
  assert.equal(await rw.write.isOwned(), false)
  assert.equal(await other.write.isOwned(), false, 'the waiting writer did not get in')
  await rw.read.release()
  await within(writing, 5000, "the other writer's acquisition")
  assert.ok(other.write.fencingToken > readToken)
  await other.write.release()
})

test('a waiting writer makes new readers wait behind it, while a reader inside still nests', async () => {
  const reader = env.client.rwLock('prefer', { timeoutMs: 0 })
  await reader.read.acquire()
  const writer = env.client.rwLock('prefer', { timeoutMs: 10000, queueAfterMs: 0 })
  const writing = writer.write.acquire()
  await waitFor(async () => (await inLine('prefer')) === 1, { what: 'the writer in line' })
  const late = env.client.rwLock('prefer', { timeoutMs: 0 })
  assert.equal(await late.read.tryAcquire(), false, 'a new reader waits behind the writer')
  // Never waiting on the writer it blocks itself.
  assert.equal(await reader.read.tryAcquire(), true)
  await reader.read.release()
  await reader.read.release()
  await within(writing, 5000, "the writer's acquisition")
  assert.equal(await late.read.tryAcquire(), false, 'the writer is inside')
  await writer.write.release()
  assert.equal(await late.read.tryAcquire(), true)
  await late.read.release()
})

test('the sides are Locks of one owner: the handle, or the using() scope of the calling flow', async () => {
  const rw = env.client.rwLock('owners', { timeoutMs: 0 })
  assert.ok(rw.read instanceof Lock && rw.write instanceof Lock)
  assert.equal(rw.read, rw.read, 'one Lock per side')
  assert.equal(rw.name, 'owners')
  const outsider = env.client.rwLock('owners', { timeoutMs: 0 })
  const value = await rw.write.using(async (signal, lock) => {
    assert.equal(lock, rw.write)
    assert.equal(signal.aborted, false)
    // Made in the scope's flow: the scope's owner, so both sides nest.
    const inner = env.client.rwLock('owners', { timeoutMs: 0 })
    await inner.write.acquire()
    assert.equal(inner.write.fencingToken, rw.write.fencingToken, 'the same holding')
    await inner.read.acquire()
    await inner.read.release()
    await inner.write.release()
    assert.equal(await rw.write.isOwned(), true, 'one release each')
    await assert.rejects(outsider.read.acquire(), LockTimeoutError, 'a handle made outside is another owner')
    return 'written'
  })
  assert.equal(value, 'written')
  assert.equal(await env.redis.cli('EXISTS', key('owners')), '0', 'released after the callback')
})

test('a lost read lease aborts the signal of its side, and using() rejects LockLostError', async () => {
  const err = await env.client
    .rwLock('lost', { ttlMs: 600 })
    .read.using(async (signal) => {
      await env.redis.cli('DEL', key('lost'))
      assert.ok((await aborted(signal, 3000)) instanceof LockLostError)
    })
    .catch((e) => e)
  assert.ok(err instanceof LockLostError, String(err))
})

test('a mutex, a read-write lock and a semaphore of one name are three locks', async () => {
  const mutex = env.client.lock('three')
  await mutex.acquire()
  const rw = env.client.rwLock('three', { timeoutMs: 0 })
  await rw.write.acquire()
  const sem = env.client.semaphore('three', { permits: 1, timeoutMs: 0 })
  await sem.acquire()
  assert.equal(await env.redis.cli('EXISTS', 'rlock:{three}', key('three'), 'rlock:{three}:semaphore'), '3')
  await sem.release()
  await rw.write.release()
  await mutex.release()
})

test('await using releases a side it holds, and nothing when it holds none', async () => {
  const rw = env.client.rwLock('dispose')
  await rw.read.acquire()
  await rw.read[Symbol.asyncDispose]()
  assert.equal(await env.redis.cli('EXISTS', key('dispose')), '0')
  await rw.write[Symbol.asyncDispose]()
})
