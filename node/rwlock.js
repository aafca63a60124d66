'use strict'

const { Lock, CONSTRUCT } = require('./lock.js')

/**
 * A read-write lock: any number of readers or one writer. Its sides are
 * `Lock`s of one owner: reading inside a write nests (releasing the write
 * then is a downgrade: no writer gets in between), writing while holding
 * only read rejects `LockUpgradeError` at once.
 */
class RwLock {
  #name
  #read
  #write

  /** @private Use `client.rwLock()`. */
  constructor(token, nativeRwLock, id) {
    if (token !== CONSTRUCT) throw new TypeError('use client.rwLock() to make a RwLock')
    this.#name = id.name
    this.#read = new Lock(CONSTRUCT, nativeRwLock.read, id)
    this.#write = new Lock(CONSTRUCT, nativeRwLock.write, id)
  }

  get name() {
    return this.#name
  }

  /** The read side: shared with other readers. */
  get read() {
    return this.#read
  }

  /** The write side: nobody else inside. */
  get write() {
    return this.#write
  }
}

module.exports = { RwLock }
