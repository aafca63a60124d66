// A typed usage of the package, checked by `tsc --noEmit` (tests/node/types.test.js).
// Lines marked @ts-expect-error must fail to type-check: the declarations are
// strict enough to catch those mistakes.

import {
  CacheLoaderError,
  Client,
  Lock,
  LockError,
  LockLostError,
  LockNotOwnedError,
  LockTimeoutError,
  LockUpgradeError,
  RwLock,
  Semaphore,
  type CacheOptions,
  type Inspection,
  type LostReason,
  type Stats,
  type LockOptions,
} from 'redis-rlock'

export async function usage(): Promise<number> {
  const client: Client = await Client.connect('redis://127.0.0.1:6379', { prefix: 'app' })
  const fromEnv: Client = await Client.connect()
  await fromEnv.close()
  const redlock: Client = await Client.connect(['redis://a:6379', 'redis://b:6379', 'redis://c:6379'])
  const seeds: readonly string[] = ['redis://a:7000', 'redis://b:7000']
  const cluster: Client = await Client.connect(seeds, { cluster: true, prefix: 'app' })
  const tls: Client = await Client.connect('rediss://db:6380', { tlsCa: '-----BEGIN CERTIFICATE-----' })
  const tlsBytes: Client = await Client.connect('rediss://db:6380', { tlsCa: new Uint8Array(0) })
  const replicated: Lock = redlock.lock('x', { syncReplicas: 1 })
  const queued: Lock = client.lock('x', { queueAfterMs: 0 })
  const dayLong: Lock = client.lock('x', { ttlMs: 86_400_000, allowLongTtl: true })
  // Any ioredis Redis or Cluster instance has these two.
  const reused: Client = await Client.fromIoredis({ isCluster: false, options: { host: 'db', port: 6379 } }, { prefix: 'app' })
  void [cluster, tls, tlsBytes, replicated, queued, dayLong, reused]

  const options: LockOptions = { ttlMs: 10_000, timeoutMs: 3_000, autoRenew: true, maxHoldMs: 60_000 }
  const lock: Lock = client.lock('product:1001', options)
  const controller = new AbortController()
  await lock.acquire({ signal: controller.signal })
  await lock.acquire()
  const token: number | null = lock.fencingToken
  const lost: boolean = lock.lost
  const signal: AbortSignal = lock.signal
  const name: string = lock.name
  await lock.extend(20_000)
  await lock.extend()
  const locked: boolean = await lock.isLocked()
  const owned: boolean = await lock.isOwned()
  const got: boolean = await lock.tryAcquire()
  await lock.release()
  await lock[Symbol.asyncDispose]()
  {
    await using scoped = client.lock('scoped')
    await scoped.acquire()
  }

  const value: number = await client.using('product:1001', { ttlMs: 5_000 }, async (s: AbortSignal, held: Lock) => {
    s.throwIfAborted()
    return held.fencingToken ?? 0
  })
  const short: string = await client.using('product:1001', () => 'sync value')
  const byHandle: number = await lock.using({ signal: controller.signal }, async (s: AbortSignal, held: Lock) => 1)

  const rw: RwLock = client.rwLock('config', { ttlMs: 5_000, fair: true })
  const readSide: Lock = rw.read
  await rw.write.acquire()
  const read: string = await rw.read.using(async (s: AbortSignal, held: Lock) => held.name)
  await rw.write.release()
  const sem: Semaphore = client.semaphore('pool', { permits: 4, ttlMs: 5_000 })
  const size: number = sem.size
  await sem.acquire({ permits: 2, signal: controller.signal })
  const tried: boolean = await sem.tryAcquire({ permits: 2 })
  const free: number = await sem.available()
  const held: number = await sem.held()
  const asLock: Lock = sem
  const inSemaphore: number = await sem.using({ permits: 3 }, async (s, taken: Semaphore) => taken.size)
  void [byHandle, readSide, read, size, tried, free, held, asLock, inSemaphore]

  const cacheOptions: CacheOptions = { ttlMs: 60_000, staleMs: 30_000, noneTtlMs: 5_000, jitter: 0.1, early: 1 }
  const product: { price: number } | undefined = await client.cached('product:1001', async () => ({ price: 12 }), cacheOptions)
  const page: string | undefined = await client.cached('page', () => 'html', { ttlMs: 1_000, timeoutMs: 500, onError: 'retry' })
  const image: Buffer | undefined = await client.cached('image', () => Buffer.alloc(1), { ttlMs: 1_000, lockTtlMs: 5_000 })
  const missing: undefined = await client.cached('gone', () => undefined, { ttlMs: 1_000 })
  const dropped: boolean = await client.invalidate('product:1001')
  try {
    await client.cached('product:1001', async () => ({ price: 12 }), cacheOptions)
  } catch (err) {
    if (err instanceof CacheLoaderError) {
      const code: 'ERR_CACHE_LOADER' = err.code
      const key: string = err.key
      void [code, key]
    }
  }
  void [product, page, image, missing, dropped]

  client.on('lost', ({ name, reason, fence }) => {
    const why: LostReason = reason
    void [name, why, fence + 1]
  })
  client.on('renewalFailed', ({ name }) => void name.length)
  client.on('reconnect', ({ server }) => void server.length)
  client.on('error', ({ message }) => void message.length)
  const seen: Inspection = await client.inspect('product:1001')
  const host: string | undefined = seen.holder?.client?.host ?? undefined
  const waiters: number = seen.waiters.length + seen.waiting
  const stats: Stats = client.stats()
  const lostExpired: number = stats.lost.expired + stats.wait.count
  const metrics: string = client.prometheus()
  void [host, waiters, lostExpired, metrics]
  // @ts-expect-error there is no such event
  client.on('acquired', () => {})
  // @ts-expect-error a lost event's details are an object
  client.on('lost', (reason: string) => void reason)

  try {
    await lock.release()
  } catch (err) {
    if (err instanceof LockNotOwnedError) {
      const reason: 'not acquired by this owner' | 'already released' | 'expired' | 'held by another owner' | 'forced' = err.reason
      void reason
    } else if (err instanceof LockTimeoutError || err instanceof LockLostError) {
      const code: 'ERR_LOCK_TIMEOUT' | 'ERR_LOCK_LOST' = err.code
      void code
    } else if (err instanceof LockUpgradeError) {
      const code: 'ERR_LOCK_UPGRADE' = err.code
      void code
    } else if (err instanceof LockError) {
      const code: string = err.code
      void code
    }
  }

  // @ts-expect-error ttlMs is a number of milliseconds
  client.lock('x', { ttlMs: '1000' })
  // @ts-expect-error options are the documented ones
  client.lock('x', { ttl: 1000 })
  // @ts-expect-error node-redlock's and redis-semaphore's names are not options
  client.lock('x', { timeout: 300 })
  // @ts-expect-error allowLongTtl is a boolean
  client.lock('x', { allowLongTtl: 'yes' })
  // @ts-expect-error fromIoredis() takes an ioredis instance, not a URL
  await Client.fromIoredis('redis://127.0.0.1:6379')
  // @ts-expect-error syncReplicas is a number of replicas
  client.lock('x', { syncReplicas: true })
  // @ts-expect-error queueAfterMs is a number of milliseconds
  client.lock('x', { queueAfterMs: '10' })
  // @ts-expect-error cluster is a boolean
  await Client.connect(seeds, { cluster: 'yes' })
  // @ts-expect-error URLs are strings
  await Client.connect([6379])
  // @ts-expect-error a lock name is a string
  client.lock(1001)
  // @ts-expect-error release() resolves with nothing
  const released: number = await lock.release()
  // @ts-expect-error fencingToken is read-only
  lock.fencingToken = 3
  // @ts-expect-error Client.connect() is the way to make a client
  new Client()
  // @ts-expect-error a semaphore has its number of permits
  client.semaphore('pool', { ttlMs: 1000 })
  // @ts-expect-error permits is a number
  client.semaphore('pool', { permits: '3' })
  // @ts-expect-error a mutex's acquisition takes no permits
  await lock.acquire({ permits: 2 })
  // @ts-expect-error a cache entry has its ttl
  await client.cached('x', () => 1, {})
  // @ts-expect-error onError is 'share' or 'retry'
  await client.cached('x', () => 1, { ttlMs: 1_000, onError: 'ignore' })
  // @ts-expect-error the loader takes no arguments
  await client.cached('x', (key: string) => key, { ttlMs: 1_000 })
  // @ts-expect-error the value is the loader's type
  const wrong: number | undefined = await client.cached('x', () => 'text', { ttlMs: 1_000 })
  // @ts-expect-error a cache key is a string
  await client.invalidate(1001)
  // @ts-expect-error the sides of a read-write lock are read-only
  rw.read = rw.write

  void [token, lost, signal, name, locked, owned, got, short, released, wrong]
  await client.close()
  return value
}
