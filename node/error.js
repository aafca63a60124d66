'use strict'
// The package's errors. The native side builds each rejection through
// `makeError` (node/src/error.rs) on the JS thread, so a lock operation
// rejects with the package's own class and no extra promise hop in JS.

/** The base of every lock error this package raises (bad input aside). */
class LockError extends Error {
  constructor(message, code) {
    super(message)
    this.name = new.target.name
    this.code = code
  }
}

/** Not acquired before the deadline (or busy on a single attempt). */
class LockTimeoutError extends LockError {
  constructor(message) {
    super(message, 'ERR_LOCK_TIMEOUT')
  }
}

/** Release or extend of a lock this owner does not hold. */
class LockNotOwnedError extends LockError {
  constructor(message, reason) {
    super(message, 'ERR_LOCK_NOT_OWNED')
    /**
     * 'not acquired by this owner', 'already released', 'expired' (the key
     * is gone) or 'held by another owner'.
     */
    this.reason = reason
  }
}

/** The lease ended while its holder still ran. */
class LockLostError extends LockError {
  constructor(message, reason) {
    super(message, 'ERR_LOCK_LOST')
    /** Why the lease ended. */
    this.reason = reason
  }
}

/** Redis unreachable, authentication refused, or a protocol error. */
class LockConnectionError extends LockError {
  constructor(message) {
    super(message, 'ERR_LOCK_CONNECTION')
  }
}

/** The client was closed: every later operation of it or its locks rejects with this. */
class ClientClosedError extends LockError {
  constructor(message) {
    super(message, 'ERR_LOCK_CLIENT_CLOSED')
  }
}

/**
 * Write asked by an owner that holds only read of a read-write lock: refused
 * at once, as two such owners would wait on each other for ever.
 */
class LockUpgradeError extends LockError {
  constructor(message) {
    super(message, 'ERR_LOCK_UPGRADE')
  }
}

/**
 * The loader of a cache entry failed in the caller that was rebuilding it
 * (in this process or another), for a caller that waited for that rebuild.
 * The caller whose own loader failed gets that loader's error instead.
 */
class CacheLoaderError extends LockError {
  constructor(message, key) {
    super(message, 'ERR_CACHE_LOADER')
    /** The cache key. */
    this.key = key
  }
}

function invalidArg(ErrorClass, message) {
  const err = new ErrorClass(message)
  err.code = 'ERR_INVALID_ARG'
  return err
}

// What the native side rejects a wait with when its AbortSignal fired; the
// face replaces it with the signal's own reason.
const ABORTED = new Error('aborted')

/**
 * Builds this package's errors from the category the core names; `detail`
 * is the reason of a 'not owner' or 'lost' error, the key of a 'loader' one.
 */
function makeError(category, message, detail) {
  switch (category) {
    case 'timeout':
      return new LockTimeoutError(message)
    case 'not owner':
      return new LockNotOwnedError(message, detail ?? undefined)
    case 'lost':
      return new LockLostError(message, detail ?? undefined)
    case 'loader':
      return new CacheLoaderError(message, detail ?? undefined)
    case 'connection':
      return new LockConnectionError(message)
    case 'closed':
      return new ClientClosedError(message)
    case 'upgrade':
      return new LockUpgradeError(message)
    case 'bad input':
      return invalidArg(TypeError, message)
    case 'out of range':
      return invalidArg(RangeError, message)
    case 'aborted':
      return ABORTED
    default:
      return new LockError(message)
  }
}

module.exports = {
  LockError,
  LockTimeoutError,
  LockNotOwnedError,
  LockLostError,
  LockConnectionError,
  ClientClosedError,
  LockUpgradeError,
  CacheLoaderError,
  invalidArg,
  ABORTED,
  makeError,
}
