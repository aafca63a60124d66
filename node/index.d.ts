// Types of the redis-rlock package (its JS face is node/index.js and the modules it gathers).

import { EventEmitter } from 'node:events'

export interface ConnectOptions {
  /** Prefix of every key: `PREFIX:{NAME}`. Default `'rlock'`. */
  prefix?: string
  /** The URLs are seed nodes of one Redis Cluster (not independent Redlock masters). Default false. */
  cluster?: boolean
  /** The CA certificate (PEM text or bytes) that signed the servers' certificates, for `rediss://` with a private CA. */
  tlsCa?: string | Uint8Array
}

export interface LockOptions {
  /** The lease in milliseconds: how long the lock outlives a holder that stops renewing it. Default 30000. */
  ttlMs?: number
  /** How long `acquire()` waits. Unset: forever; 0: one attempt. */
  timeoutMs?: number
  /** Renew the lease every ttlMs/3 while held (the watchdog). Default true. */
  autoRenew?: boolean
  /** Cap on the total hold time: renewal stops so the lease ends by then. */
  maxHoldMs?: number
  /**
   * After each acquisition and each `extend()`, wait (`WAIT`) until this many
   * replicas have it; an acquisition fewer acknowledged is undone and retried,
   * so a wait that ends that way rejects `LockTimeoutError`.
   */
  syncReplicas?: number
  /**
   * Fair mode: waiters queue in Redis and each release hands the lock to the
   * next one in line (first come, first served; nobody barges in). Not with
   * several independent masters. Default false.
   */
  fair?: boolean
  /**
   * When not fair: how long a waiter competes for releases before it takes a
   * place in that line, from where releases are handed over in turn. 0 joins
   * at once. Default 10. Redlock keeps no line.
   */
  queueAfterMs?: number
  /**
   * A lease over an hour (`ttlMs` above 3600000) without `maxHoldMs` warns
   * once per process (`RLOCK_LONG_TTL`), as it often means seconds written
   * as milliseconds; true says it is meant. Default false.
   */
  allowLongTtl?: boolean
}

export interface UsingOptions extends LockOptions {
  /** Cancels the wait for the lock (not the callback: it gets the lock's own signal). */
  signal?: AbortSignal
}

export interface FromIoredisOptions {
  /** Prefix of every key: `PREFIX:{NAME}`. Default `'rlock'`. */
  prefix?: string
  /** The CA certificate (PEM) for TLS. Default: the instance's `tls.ca` when it is one PEM. */
  tlsCa?: string | Uint8Array
}

/** An ioredis `Redis` (one server or Sentinel) or `Redis.Cluster` instance: only its settings are read. */
export interface IoredisInstance {
  readonly isCluster: boolean
  readonly options: object
}

export interface AcquireOptions {
  /** Aborting it ends the wait; `acquire()` then rejects with `signal.reason`. */
  signal?: AbortSignal
}

export interface SemaphoreOptions extends LockOptions {
  /** How many permits it has: a whole number from 1 to 1000000. Every handle of one name must agree while anyone holds it. */
  permits: number
}

export interface PermitsOptions {
  /** How many permits this acquisition takes: a whole number from 1 to the size. Default 1. */
  permits?: number
}

export interface SemaphoreAcquireOptions extends AcquireOptions, PermitsOptions {}

/** The bounds of a run-once job (`client.runOnce()`), in milliseconds. */
export interface JobOptions {
  /** From the job's start, how long nobody runs it again, however soon it ends (default 0). */
  atLeastMs?: number
  /** How long its lock is taken for, not renewed (default an hour); past it while it runs the lock is lost. */
  atMostMs?: number
}

/** What `client.runOnce()` resolves: the job's value where it ran, or that it ran elsewhere this period. */
export type RunOnce<T> = { ran: true; value: T; fencingToken: number } | { ran: false }

export interface CacheOptions {
  /** How long an entry stays fresh, in milliseconds (less up to `jitter` of it). Required. */
  ttlMs: number
  /**
   * After the ttl, how long the old value is still returned at once while one
   * caller refreshes it in the background (stale-while-revalidate). Unset or 0: none.
   */
  staleMs?: number
  /** How long "nothing found" (a loader's null or undefined) is kept. Default min(10000, ttlMs). */
  noneTtlMs?: number
  /** The share of the ttl taken off at random, from 0 to below 1, so entries filled together expire apart. Default 0.1. */
  jitter?: number
  /** Early refresh (XFetch's beta, 0 to 100): one caller refreshes a hot entry before it expires; 0: never. Default 1. */
  early?: number
  /** How long to wait for another caller's rebuild (then `LockTimeoutError`). Unset: as long as it takes. */
  timeoutMs?: number
  /**
   * When the rebuild a caller waits for fails: `'share'` rejects `CacheLoaderError`,
   * `'retry'` makes one of the waiters rebuild. Default `'share'`.
   */
  onError?: 'share' | 'retry'
  /** The lease of the rebuild lock, renewed while the loader runs. Default 30000. */
  lockTtlMs?: number
}

/** Why a lease was lost, as the 'lost' event and `stats().lost` name it. */
export type LostReason = 'expired' | 'held_by_another' | 'unreachable' | 'max_hold' | 'lease_ended' | 'closed' | 'forced'

/** The events a `Client` emits, each with one details object. */
export interface ClientEvents {
  /** A holding's lease was lost (once per holding; not for the client's own `close()`). */
  lost: [{ name: string; reason: LostReason; fence: number }]
  /** Redis did not confirm a renewal in time; retried until the lease ends. */
  renewalFailed: [{ name: string }]
  /** A connection to `server` dropped; the next request makes a new one. */
  reconnect: [{ server: string }]
  /** A background task failed. Emitted only while an 'error' listener is set. */
  error: [{ message: string }]
}

/** What a client registered about itself, for inspection. */
export interface ClientInfo {
  host: string | null
  pid: number | null
  process: string | null
  /** The runtime: `'node 20.1.0'`, `'python 3.11.4'`, `'rust'`, `'cli'`. */
  face: string | null
  version: string | null
  /** When it registered (ms since the Unix epoch). */
  since_ms: number | null
}

/** A holder or a waiter. */
export interface Party {
  owner: string
  client_id: string
  /** Within the client: a handle's or scope's serial in Node, `pid:tN:thread` or `pid:aN:task` in Python. */
  unit: string
  /** null once that client's registration ran out (it stopped, or its lease ended). */
  client: ClientInfo | null
  /** A waiter's time in line so far (null for a holder). */
  waited_ms: number | null
}

/** A lock as Redis has it at one moment (`client.inspect()`). */
export interface Inspection {
  name: string
  held: boolean
  owner: string | null
  /** Lease left. */
  ttl_ms: number | null
  /** Re-entries of the holding. */
  count: number
  fence: number | null
  fence_counter: number
  /** How long the current holding has been held. */
  held_ms: number | null
  waiting: number
  holder: Party | null
  /** The first waiters in line, in order. */
  waiters: Party[]
}

/** A histogram: `buckets` are `[leSeconds, cumulative]`, the last bound null (+Inf). */
export interface Timings {
  count: number
  sum_ms: number
  buckets: Array<[number | null, number]>
}

/** What a client counted since it connected. */
export interface Stats {
  acquisitions: number
  contended_acquisitions: number
  timeouts: number
  releases: number
  renewals: number
  renewal_round_trips: number
  renewal_failures: number
  lost: Record<LostReason, number>
  reconnects: number
  wait: Timings
  hold: Timings
}

export declare class Client extends EventEmitter<ClientEvents> {
  private constructor()
  /**
   * Connects to `url` (default: `REDIS_URL`, else `redis://127.0.0.1:6379`):
   * `redis://`, `rediss://` or `redis+sentinel://host:port[,host:port]/service[/db]`.
   * An array of URLs is a Redlock over independent masters (each lock held on
   * a majority), or with `{ cluster: true }` the seeds of one Redis Cluster.
   */
  static connect(url?: string | readonly string[], options?: ConnectOptions): Promise<Client>
  /**
   * Connects, with connections of its own, to the servers an ioredis instance
   * is set up for: host, port, db, username, password and TLS, its Sentinels
   * and master name, or a Cluster's startup nodes. Anything else is a `TypeError`.
   */
  static fromIoredis(redis: IoredisInstance, options?: FromIoredisOptions): Promise<Client>
  /**
   * A lock owned by a new handle, or inside a `using()` of the same name by
   * that scope (so it nests). Bad options throw here, before any I/O.
   */
  lock(name: string, options?: LockOptions): Lock
  /**
   * A read-write lock owned by a new handle, or inside a `using()` of one of
   * its sides by that scope: `.read` and `.write` are `Lock`s of that one owner.
   * Bad options throw here, before any I/O.
   */
  rwLock(name: string, options?: LockOptions): RwLock
  /**
   * A semaphore of `permits` permits owned by a new handle, or inside its
   * `using()` by that scope. Bad options throw here, before any I/O.
   */
  semaphore(name: string, options: SemaphoreOptions): Semaphore
  /**
   * Acquires `name`, runs `fn`, always releases, and returns what `fn` returns.
   * If `fn` throws, that error is what the caller sees; if the lease was lost
   * while `fn` ran, rejects with `LockLostError`. A `using()` or `lock()` of
   * the same name from `fn`'s flow nests; any other flow waits.
   */
  using<T>(name: string, fn: (signal: AbortSignal, lock: Lock) => T | PromiseLike<T>): Promise<T>
  using<T>(
    name: string,
    options: UsingOptions | undefined,
    fn: (signal: AbortSignal, lock: Lock) => T | PromiseLike<T>,
  ): Promise<T>
  /**
   * The value of the cache entry `key`: from the cache, or from `loader()`, run
   * by one caller across every process while the others wait for what it
   * stores. A Buffer (any Uint8Array) is stored as bytes, a string as text,
   * null or undefined as "nothing found" (read back as undefined), anything
   * else as JSON. Rejects with the loader's own error when it fails, and with
   * `CacheLoaderError` when the rebuild this caller waited for failed.
   */
  cached<T>(key: string, loader: () => T | PromiseLike<T>, options: CacheOptions): Promise<T | undefined>
  /**
   * Runs `fn` as the run-once job `name` if this process takes its lock (one attempt, never a
   * wait), the others resolving `{ ran: false }` at once; the lock stays taken until `atLeastMs`
   * after the start, taken for `atMostMs` while `fn` runs.
   */
  runOnce<T>(
    name: string,
    fn: (job: { fencingToken: number }) => T | PromiseLike<T>,
    options?: JobOptions,
  ): Promise<RunOnce<Awaited<T>>>
  /** Deletes the cache entry `key` (true when there was one): the next read rebuilds it. */
  invalidate(key: string): Promise<boolean>
  /** Who holds the lock `name` and who waits for it, as Redis has it now. */
  inspect(name: string): Promise<Inspection>
  /** What this client counted since it connected (no I/O). */
  stats(): Stats
  /** `stats()` in the Prometheus text exposition format. */
  prometheus(): string
  /**
   * Releases the locks still held (best effort, within 2 s; they count as lost
   * and their `signal` aborts), ends waits in progress, stops renewing and closes
   * the connections. Every later operation rejects with `ClientClosedError`.
   */
  close(): Promise<void>
}

export declare class Lock implements AsyncDisposable {
  protected constructor()
  readonly name: string
  /** This handle's fencing token while it holds the lock, else null. */
  readonly fencingToken: number | null
  /** True once this handle's lease ended while it held the lock. */
  readonly lost: boolean
  /** Aborted, its reason a `LockLostError`, when this handle's lease is lost. */
  readonly signal: AbortSignal
  /** Acquires, waiting as `timeoutMs` allows; rejects `LockTimeoutError`. Nests for the same owner. */
  acquire(options?: AcquireOptions): Promise<void>
  /** One attempt: true when acquired. */
  tryAcquire(): Promise<boolean>
  /** Releases one acquisition; rejects `LockNotOwnedError` when its owner does not hold it. */
  release(): Promise<void>
  /** Resets the lease to `ttlMs` (default: the lock's ttlMs). Mutates this lock. */
  extend(ttlMs?: number): Promise<void>
  /** Whether anyone holds the lock. */
  isLocked(): Promise<boolean>
  /** Whether this lock's owner holds it. */
  isOwned(): Promise<boolean>
  /** Releases if this handle holds the lock; nothing otherwise. */
  [Symbol.asyncDispose](): Promise<void>
  /**
   * Acquires, runs `fn`, always releases, and returns what `fn` returns, as
   * `client.using()` does, as this lock's owner: a lock of the same kind and
   * name made in `fn`'s flow nests.
   */
  using<T>(fn: (signal: AbortSignal, lock: this) => T | PromiseLike<T>): Promise<T>
  using<T>(options: AcquireOptions | undefined, fn: (signal: AbortSignal, lock: this) => T | PromiseLike<T>): Promise<T>
}

/**
 * A read-write lock: any number of readers or one writer; a waiting writer
 * makes new readers wait behind it. Both sides are `Lock`s of one owner.
 */
export declare class RwLock {
  private constructor()
  readonly name: string
  /** Shared with other readers; nests inside this owner's read or write. */
  readonly read: Lock
  /** Nobody else inside; rejects `LockUpgradeError` while this owner holds only read. */
  readonly write: Lock
}

/**
 * A counting semaphore: at most `size` permits held at once. A `Lock` taking
 * one permit unless an acquisition asks for more; its owner holds one number
 * of permits at a time, and acquiring again nests in it.
 */
export declare class Semaphore extends Lock {
  private constructor()
  /** The permits it has. */
  readonly size: number
  /** Acquires `permits` (default 1), waiting as `timeoutMs` allows. */
  acquire(options?: SemaphoreAcquireOptions): Promise<void>
  /** One attempt at `permits` (default 1): true when acquired. */
  tryAcquire(options?: PermitsOptions): Promise<boolean>
  using<T>(fn: (signal: AbortSignal, lock: this) => T | PromiseLike<T>): Promise<T>
  using<T>(
    options: SemaphoreAcquireOptions | undefined,
    fn: (signal: AbortSignal, lock: this) => T | PromiseLike<T>,
  ): Promise<T>
  /** Permits free now (asks Redis). */
  available(): Promise<number>
  /** Permits held now, by every holder (asks Redis). */
  held(): Promise<number>
}

/** Base of the lock errors below. */
export declare class LockError extends Error {
  readonly code:
    | 'ERR_LOCK_TIMEOUT'
    | 'ERR_LOCK_NOT_OWNED'
    | 'ERR_LOCK_LOST'
    | 'ERR_LOCK_CONNECTION'
    | 'ERR_LOCK_CLIENT_CLOSED'
    | 'ERR_LOCK_UPGRADE'
    | 'ERR_CACHE_LOADER'
}

export declare class LockTimeoutError extends LockError {
  readonly code: 'ERR_LOCK_TIMEOUT'
}

export declare class LockNotOwnedError extends LockError {
  readonly code: 'ERR_LOCK_NOT_OWNED'
  readonly reason: 'not acquired by this owner' | 'already released' | 'expired' | 'held by another owner' | 'forced'
}

export declare class LockLostError extends LockError {
  readonly code: 'ERR_LOCK_LOST'
  /** Why the lease ended (for example 'the lock key disappeared as it expired or was deleted'). */
  readonly reason: string
}

export declare class LockConnectionError extends LockError {
  readonly code: 'ERR_LOCK_CONNECTION'
}

/** The client was closed: every later operation of it or its locks rejects with this. */
export declare class ClientClosedError extends LockError {
  readonly code: 'ERR_LOCK_CLIENT_CLOSED'
}

/** Write asked by an owner that holds only read of a read-write lock: refused at once. */
export declare class LockUpgradeError extends LockError {
  readonly code: 'ERR_LOCK_UPGRADE'
}

/**
 * The rebuild a `cached()` caller waited for (in this process or another)
 * failed: its loader threw. The caller whose own loader threw gets that error.
 */
export declare class CacheLoaderError extends LockError {
  readonly code: 'ERR_CACHE_LOADER'
  /** The cache key. */
  readonly key: string
}
