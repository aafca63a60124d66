'use strict'

const tracing = require('./tracing.js')
const { Lock, CONSTRUCT, acquiring } = require('./lock.js')
const { expect, optionsObject, acquireOptions, PERMITS_OPTIONS } = require('./options.js')

/**
 * A counting semaphore: at most `size` permits held at once. It is a `Lock`
 * taking one permit unless an acquisition asks for more; its owner holds
 * one number of permits at a time, and acquiring again nests in it.
 */
class Semaphore extends Lock {
  #native

  /** @private Use `client.semaphore()`. */
  constructor(token, nativeSemaphore, id) {
    if (token !== CONSTRUCT) throw new TypeError('use client.semaphore() to make a Semaphore')
    super(token, nativeSemaphore.lock(1), id)
    this.#native = nativeSemaphore
  }

  /** The permits it has. */
  get size() {
    return this.#native.size
  }

  /** Acquires `permits` (default 1) permits, waiting as `acquire()` does. */
  acquire(options) {
    let taking
    let signal
    try {
      const checked = acquireOptions(options, PERMITS_OPTIONS)
      taking = this.#taking(checked.permits)
      signal = checked.signal
    } catch (err) {
      return Promise.reject(err)
    }
    if (!tracing.enabled) return acquiring(taking, signal)
    return tracing.acquire(this, () => acquiring(taking, signal))
  }

  /** One attempt at `permits` (default 1) permits: true when acquired. */
  tryAcquire(options) {
    try {
      const { permits } = optionsObject(options, 'options', ['permits'])
      const taking = this.#taking(permits)
      if (!tracing.enabled) return taking.tryAcquire()
      return tracing.acquire(this, () => taking.tryAcquire(), (got) => got)
    } catch (err) {
      return Promise.reject(err)
    }
  }

  /** Permits free now (asks Redis). */
  available() {
    return this.#native.available()
  }

  /** Permits held now, by every holder (asks Redis). */
  held() {
    return this.#native.held()
  }

  /** This owner's handle taking `permits` (checked before any I/O). */
  #taking(permits = 1) {
    expect(typeof permits === 'number', 'permits', 'a number', permits)
    return this.#native.lock(permits)
  }
}

module.exports = { Semaphore }
