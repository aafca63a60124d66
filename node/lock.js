'use strict'

const native = require('./load.js')
const tracing = require('./tracing.js')
const { LockLostError, ABORTED } = require('./error.js')
const { expect, acquireOptions, ACQUIRE_OPTIONS } = require('./options.js')
const { scopes, scoped } = require('./owners.js')

const asyncDispose = Symbol.asyncDispose ?? Symbol.for('nodejs.asyncDispose')
// What the package's own constructors are handed: a handle gets its owner
// from the client that makes it, a Client its connection from `Client.connect()`.
const CONSTRUCT = Symbol('redis-rlock internal')

/**
 * `nativeLock.acquire()`; an aborted `signal` ends the wait, rejecting with
 * its reason (the native side leaves no lock behind).
 */
function acquiring(nativeLock, signal) {
  if (signal === undefined) return nativeLock.acquire()
  if (signal.aborted) return Promise.reject(signal.reason)
  const cancel = new native.WaitCancel()
  const onAbort = () => cancel.cancel()
  signal.addEventListener('abort', onAbort, { once: true })
  return nativeLock.acquire(cancel).then(
    () => {
      signal.removeEventListener('abort', onAbort)
    },
    (err) => {
      signal.removeEventListener('abort', onAbort)
      throw err === ABORTED ? signal.reason : err
    },
  )
}

class Lock {
  #native
  // Which lock and whose (see `identity` in owners.js).
  #id
  // The AbortSignal state, made on first read of `signal`.
  #watch = null

  /** @private Use `client.lock()`. */
  constructor(token, nativeLock, id) {
    if (token !== CONSTRUCT) throw new TypeError('use client.lock() to make a Lock')
    this.#native = nativeLock
    this.#id = id
  }

  get name() {
    return this.#id.name
  }

  /** This handle's fencing token while it holds the lock, else null. */
  get fencingToken() {
    return this.#native.fencingToken
  }

  /** True once this handle's lease ended while it held the lock. */
  get lost() {
    return this.#native.lost
  }

  /**
   * Aborted, with a `LockLostError` as its reason, when the lease of this
   * handle's holding is lost. A fresh acquisition after a loss gets a fresh
   * signal.
   */
  get signal() {
    const held = this.#native.fencingToken ?? 0
    let w = this.#watch
    if (w === null) {
      w = this.#watch = { controller: new AbortController(), since: held, lostFence: 0 }
      // The callback holds the watch state, never the Lock: a Lock nobody
      // references can still be collected.
      this.#native.watchLost((fence, message, reason) => {
        // A notice about a holding older than this signal is stale.
        if (fence < w.since || fence === w.lostFence) return
        if (w.controller.signal.aborted) w.controller = new AbortController()
        w.lostFence = fence
        w.controller.abort(new LockLostError(message, reason))
      })
    } else if (w.controller.signal.aborted && held > w.lostFence) {
      w.controller = new AbortController()
      w.since = held
    }
    return w.controller.signal
  }

  /**
   * Acquires the lock, waiting as the lock's `timeoutMs` allows (rejects
   * `LockTimeoutError`). An aborted `signal` ends the wait and rejects with
   * its reason, leaving no lock behind. Acquiring again as the same owner
   * (this handle, or its `using()` scope) nests.
   */
  acquire(options) {
    let signal
    try {
      if (options !== undefined) signal = acquireOptions(options, ACQUIRE_OPTIONS).signal
    } catch (err) {
      return Promise.reject(err)
    }
    const nativeLock = this.#native
    if (!tracing.enabled) return acquiring(nativeLock, signal)
    return tracing.acquire(this, () => acquiring(nativeLock, signal))
  }

  /** One attempt: true when acquired, false when someone else holds it. */
  tryAcquire() {
    if (!tracing.enabled) return this.#native.tryAcquire()
    return tracing.acquire(this, () => this.#native.tryAcquire(), (got) => got)
  }

  /**
   * Releases one acquisition (rejects `LockNotOwnedError` when this owner
   * does not hold it, and never touches another owner's lock).
   */
  release() {
    if (!tracing.enabled) return this.#native.release()
    return tracing.release(this, () => this.#native.release())
  }

  /** Resets the lease of this held lock to `ttlMs` (default: its ttl). */
  extend(ttlMs) {
    try {
      expect(ttlMs === undefined || typeof ttlMs === 'number', 'ttlMs', 'a number', ttlMs)
      return this.#native.extend(ttlMs)
    } catch (err) {
      return Promise.reject(err)
    }
  }

  /** Whether anyone holds the lock (asks Redis). */
  isLocked() {
    return this.#native.isLocked()
  }

  /** Whether this handle holds the lock (asks Redis). */
  isOwned() {
    return this.#native.isOwned()
  }

  /** `await using`: releases if this handle holds the lock, else nothing. */
  [asyncDispose]() {
    if (!tracing.enabled) return this.#native.dispose()
    return tracing.release(this, () => this.#native.dispose())
  }

  /**
   * Acquires (`options` as `acquire()`'s), runs `fn(signal, lock)` and
   * always releases, as `client.using()` does, as this lock's owner: a lock
   * of the same kind and name made in the callback's flow nests.
   */
  async using(options, fn) {
    if (fn === undefined && typeof options === 'function') {
      fn = options
      options = undefined
    }
    expect(typeof fn === 'function', 'fn', 'a function', fn)
    return this[scoped](options, fn)
  }

  /** `using()` once its arguments are checked. */
  async [scoped](options, fn) {
    await this.acquire(options)
    const scope = { outer: scopes.getStore(), id: this.#id, open: true }
    let value
    try {
      // The hold span (when tracing) is active in the callback.
      value = await tracing.withHold(this, () => scopes.run(scope, fn, this.signal, this))
    } catch (err) {
      scope.open = false
      // A failing release (the lease was lost, Redis is down) must not hide
      // the callback's own error.
      await this.#native.finish().catch(() => {})
      if (tracing.enabled) tracing.closeHold(this, err)
      throw err
    }
    // Work the callback left running is no longer inside the scope.
    scope.open = false
    // Rejects `LockLostError` if the lease was lost meanwhile.
    if (tracing.enabled) await tracing.release(this, () => this.#native.finish())
    else await this.#native.finish()
    return value
  }
}

module.exports = { Lock, CONSTRUCT, acquiring }
