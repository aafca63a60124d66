'use strict'
// Cache values. Each is stored with a format tag that every face reads the
// same way: 'bytes' (a Buffer), 'text' (a string), 'json' (anything else
// JSON encodes); 'pickle' is Python's own. null and undefined are "nothing
// found", stored as such and read back as undefined.

const { invalidArg } = require('./error.js')
const { describe } = require('./options.js')

/**
 * What `client.cached()` answers for one read of the entry `key`: the value
 * of a hit, or the loader's (a promise) when this caller rebuilds it.
 */
function cacheAnswer(key, read, loader) {
  switch (read.kind) {
    case 'hit':
      return cacheValue(key, read)
    case 'load':
      return cacheLoad(key, read.rebuild, loader)
    default:
      // Stale-while-revalidate (or an early refresh): the current value
      // now, the loader in the background.
      cacheRefresh(key, read.rebuild, loader)
      return cacheValue(key, read)
  }
}

/** The value of a hit (or of the value a refresh replaces). */
function cacheValue(key, { value, format }) {
  if (value === null || value === undefined) return undefined
  switch (format) {
    case 'bytes':
      return value
    case 'text':
      return value.toString('utf8')
    case 'json':
      return JSON.parse(value.toString('utf8'))
    case 'pickle':
      throw cacheFormatError(`cache entry ${JSON.stringify(key)} holds a Python pickle, which only Python reads (store JSON from Python to share the entry)`)
    default:
      throw cacheFormatError(`cache entry ${JSON.stringify(key)} holds a value of format ${JSON.stringify(format)}, which this package does not read`)
  }
}

function cacheFormatError(message) {
  const err = new TypeError(message)
  err.code = 'ERR_CACHE_FORMAT'
  return err
}

/**
 * `[bytes, format]` of a loader's value; a value JSON cannot encode (a
 * BigInt, a cycle, a function) is a TypeError.
 */
function cacheEncoded(key, value) {
  if (value === null || value === undefined) return [null, 'bytes']
  if (value instanceof Uint8Array) return [Buffer.from(value.buffer, value.byteOffset, value.byteLength), 'bytes']
  if (typeof value === 'string') return [Buffer.from(value, 'utf8'), 'text']
  let json
  try {
    json = JSON.stringify(value)
  } catch (err) {
    throw invalidArg(TypeError, `cache entry ${JSON.stringify(key)}: the loader's value cannot be stored as JSON (${err.message})`)
  }
  // A function or a symbol (or a toJSON() giving undefined) encodes as nothing.
  if (json === undefined) {
    throw invalidArg(TypeError, `cache entry ${JSON.stringify(key)}: the loader's value cannot be stored as JSON (it is ${describe(value)})`)
  }
  return [Buffer.from(json, 'utf8'), 'json']
}

/**
 * Runs the loader and stores its value through `rebuild`; resolves with
 * that value (undefined for "nothing found"), stored or not (a rebuild
 * whose lease ended, or that an invalidation overtook, is not written but
 * its value is still the answer). A loader that throws, or a value that
 * cannot be stored, fails the rebuild first (the lock is given back and
 * the waiting callers told), then rejects with that error.
 */
async function cacheLoad(key, rebuild, loader) {
  let value
  let encoded
  try {
    value = await loader()
    encoded = cacheEncoded(key, value)
  } catch (err) {
    // A failure to tell the waiters must not hide the loader's own error:
    // they wake at the end of the rebuild lock's lease anyway.
    await rebuild.fail(failureMessage(err)).catch(() => {})
    throw err
  }
  await rebuild.store(...encoded)
  return value ?? undefined
}

/** What the waiters of a failed rebuild are told (in any language). */
function failureMessage(err) {
  return err instanceof Error ? `${err.name}: ${err.message}` : String(err)
}

/**
 * A refresh in the background: no caller awaits it, so a failure becomes a
 * warning (`RLOCK_CACHE_REFRESH`), never an unhandled rejection.
 */
function cacheRefresh(key, rebuild, loader) {
  cacheLoad(key, rebuild, loader).catch((err) => {
    const message = `cache entry ${JSON.stringify(key)}: the background refresh failed: ${failureMessage(err)}`
    process.emitWarning(message, { code: 'RLOCK_CACHE_REFRESH' })
  })
}

module.exports = { cacheAnswer }
