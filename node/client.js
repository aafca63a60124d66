'use strict'

const { EventEmitter } = require('node:events')
const native = require('./load.js')
const { makeError } = require('./error.js')
const {
  expect,
  expectName,
  optionsObject,
  urlList,
  pem,
  LOCK_OPTIONS,
  USING_OPTIONS,
  SEMAPHORE_OPTIONS,
  CACHE_OPTIONS,
  JOB_OPTIONS,
  CONNECT_OPTIONS,
  FROM_IOREDIS_OPTIONS,
} = require('./options.js')
const { ioredisTarget } = require('./settings.js')
const { identity, scoped } = require('./owners.js')
const { Lock, CONSTRUCT } = require('./lock.js')
const { RwLock } = require('./rwlock.js')
const { Semaphore } = require('./semaphore.js')
const { cacheAnswer } = require('./cache.js')
const { runJob } = require('./job.js')

/**
 * Events (each also told by the core's log): 'lost' `{ name, reason, fence }`
 * when a lease is lost, 'renewalFailed' `{ name }` when Redis did not confirm
 * a renewal (retried until the lease ends), 'reconnect' `{ server }` when a
 * connection dropped, 'error' `{ message }` when a background task failed
 * (told only to a listener: with none, it is not thrown).
 */
class Client extends EventEmitter {
  #native

  /** @private Use `Client.connect()`. */
  constructor(token, nativeClient) {
    if (token !== CONSTRUCT) throw new TypeError('use Client.connect() to make a Client')
    super()
    this.#native = nativeClient
    // A weak reference: the native side must not keep the client alive.
    const self = new WeakRef(this)
    nativeClient.watchEvents((kind, details) => self.deref()?.#event(kind, details))
  }

  #event(kind, details) {
    // An 'error' with no listener would throw from nowhere: the log has it.
    if (kind === 'error' && this.listenerCount('error') === 0) return
    this.emit(kind, JSON.parse(details))
  }

  /**
   * Connects to Redis: `url` defaults to `REDIS_URL`, else
   * `redis://127.0.0.1:6379`. An array of URLs is a Redlock over independent
   * masters, or with `{ cluster: true }` the seeds of one Redis Cluster.
   * `tlsCa`: the PEM (string or Buffer) of a private CA for `rediss://`.
   */
  static async connect(url, options) {
    const urls = urlList(url)
    const { prefix, cluster = false, tlsCa } = optionsObject(options, 'options', CONNECT_OPTIONS)
    expect(prefix === undefined || typeof prefix === 'string', 'prefix', 'a string', prefix)
    expect(typeof cluster === 'boolean', 'cluster', 'a boolean', cluster)
    const ca = pem(tlsCa)
    const face = `node ${process.versions.node}`
    const connected = await native.connect(urls, prefix, cluster, ca, makeError, face)
    return new Client(CONSTRUCT, connected)
  }

  /**
   * Connects to the servers an ioredis `Redis` (one server or Sentinel) or
   * `Redis.Cluster` is set up for, with its own connections: the instance
   * is only read. `tlsCa` defaults to the instance's `tls.ca`.
   */
  static async fromIoredis(redis, options) {
    const { prefix, tlsCa } = optionsObject(options, 'options', FROM_IOREDIS_OPTIONS)
    const target = ioredisTarget(redis)
    return Client.connect(target.urls, { prefix, cluster: target.cluster, tlsCa: tlsCa ?? target.tlsCa })
  }

  /**
   * A lock owned by a new handle (or, inside a `using()` of the same name,
   * by that scope); bad options throw here, before any I/O. The native side
   * reads the options (`node/src/options.rs`) and checks each.
   */
  lock(name, options) {
    expectName(name)
    const lockOptions = optionsObject(options, 'options', LOCK_OPTIONS)
    return this.#lockFor(name, lockOptions)
  }

  #lockFor(name, options) {
    const id = identity(this, 'lock', name)
    return new Lock(CONSTRUCT, this.#native.lock(name, options, id.owner), id)
  }

  /**
   * A read-write lock owned by a new handle (or, inside a `using()` of one
   * of its sides, by that scope): `.read` and `.write` are its two sides,
   * each a `Lock` of that one owner. Options as `lock()`'s, checked here.
   */
  rwLock(name, options) {
    expectName(name)
    const lockOptions = optionsObject(options, 'options', LOCK_OPTIONS)
    const id = identity(this, 'rwLock', name)
    return new RwLock(CONSTRUCT, this.#native.rwLock(name, lockOptions, id.owner), id)
  }

  /**
   * A semaphore of `permits` permits owned by a new handle (or, inside a
   * `using()` of it, by that scope); the other options are `lock()`'s, all
   * checked here.
   */
  semaphore(name, options) {
    expectName(name)
    const { permits, ...lockOptions } = optionsObject(options, 'options', SEMAPHORE_OPTIONS)
    expect(typeof permits === 'number', 'permits', 'a number', permits)
    const id = identity(this, 'semaphore', name)
    return new Semaphore(CONSTRUCT, this.#native.semaphore(name, permits, lockOptions, id.owner), id)
  }

  /**
   * Acquires `name`, runs `fn(signal, lock)`, and always releases. Returns
   * what `fn` returns; if `fn` throws, that error is what the caller sees. If
   * the lease was lost while `fn` ran, rejects with `LockLostError`. The
   * scope owns the lock: a `using()` or `client.lock()` of the same name
   * from the callback's flow nests; any other flow waits.
   */
  async using(name, options, fn) {
    if (fn === undefined && typeof options === 'function') {
      fn = options
      options = undefined
    }
    expect(typeof fn === 'function', 'fn', 'a function', fn)
    expectName(name)
    const { signal, ...lockOptions } = optionsObject(options, 'options', USING_OPTIONS)
    return this.#lockFor(name, lockOptions)[scoped]({ signal }, fn)
  }

  /**
   * The value of the cache entry `key`: from the cache, or from `loader()`
   * (a value or a promise of one), run by one caller across every process
   * while the others wait for what it stores. How values are stored and
   * read back: "Cache values" in cache.js. Bad arguments reject before any I/O.
   */
  async cached(key, loader, options) {
    expectName(key, 'key')
    expect(typeof loader === 'function', 'loader', 'a function', loader)
    const read = await this.#native.cacheRead(key, optionsObject(options, 'options', CACHE_OPTIONS))
    return cacheAnswer(key, read, loader)
  }

  /**
   * Runs `fn({ fencingToken })` as the run-once job `name`: here, if this
   * process takes the job's lock (one attempt, never a wait), resolving
   * `{ ran: true, value, fencingToken }`; else at once `{ ran: false }`. The
   * lock stays taken until `atLeastMs` after the start (default 0), also when
   * `fn` rejects, so nobody runs the job again this period; it is taken for
   * `atMostMs` (default an hour), not renewed: past it while `fn` runs it is
   * lost (`LockLostError`, once `fn` is done) and another process may run the
   * job. Bad arguments reject before any I/O.
   */
  async runOnce(name, fn, options) {
    expectName(name)
    expect(typeof fn === 'function', 'fn', 'a function', fn)
    const job = await this.#native.startJob(name, optionsObject(options, 'options', JOB_OPTIONS))
    return runJob(job, fn)
  }

  /**
   * Deletes the cache entry `key`, so the next read rebuilds it: true when
   * there was one. A rebuild running meanwhile does not store its value.
   */
  async invalidate(key) {
    expectName(key, 'key')
    return this.#native.invalidate(key)
  }

  /**
   * Who holds the lock `name` and who waits for it, as Redis has it now:
   * `{ name, held, owner, ttl_ms, count, fence, fence_counter, held_ms,
   * waiting, holder, waiters }`, `holder` and each waiter a party `{ owner,
   * client_id, unit, client }`, where `client` is what that client
   * registered (`{ host, pid, process, face, version, since_ms }`), null
   * once its registration ran out.
   */
  async inspect(name) {
    expectName(name)
    return JSON.parse(await this.#native.inspect(name))
  }

  /**
   * What this client counted since it connected (no I/O): acquisitions,
   * contended_acquisitions, timeouts, releases, renewals,
   * renewal_round_trips, renewal_failures, reconnects, lost (by reason), and
   * the wait and hold histograms `{ count, sum_ms, buckets }` (`buckets`:
   * `[leSeconds, cumulative]` pairs, the last bound null for +Inf).
   */
  stats() {
    return JSON.parse(this.#native.stats())
  }

  /** `stats()` in the Prometheus text format, for a `/metrics` endpoint. */
  prometheus() {
    return this.#native.prometheus()
  }

  /**
   * Closes the client: locks still held are released (best effort: one Redis
   * does not release within 2 s expires with its lease) and count as lost
   * (their `signal` aborts), waits in progress reject, renewals stop, the
   * connections close, and every later operation of the client or its locks
   * rejects with `ClientClosedError`. Resolves once the releases are done;
   * closing again does nothing more.
   */
  close() {
    try {
      return this.#native.close()
    } catch (err) {
      return Promise.reject(err)
    }
  }
}

module.exports = { Client }
