// ESM entry: the same module instance as the CommonJS entry, so classes and
// `instanceof` checks agree whichever way the package is loaded.
import rlock from './index.js'

export const {
  Client,
  Lock,
  LockError,
  LockTimeoutError,
  LockNotOwnedError,
  LockLostError,
  LockConnectionError,
} = rlock

export default rlock
