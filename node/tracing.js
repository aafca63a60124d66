'use strict'
// OpenTelemetry spans of lock operations, when the application has
// `@opentelemetry/api` installed (an optional peer dependency); without it
// `enabled` is false and the lock's calls go straight to the addon.
//
// - `rlock.acquire`: one acquisition, from the call to the grant or the
//   refusal (its duration is the wait), a child of the active span;
//   attributes `rlock.lock`, `rlock.acquired`, `rlock.fencing_token`.
// - `rlock.hold`: from the grant to the release of that holding. Inside
//   `using()` it is the active span, so the callback's spans are its
//   children; after an explicit `acquire()` it is not made active.

let api = null
try {
  api = require('@opentelemetry/api')
} catch {
  // Not installed: nothing is traced.
}

const tracer = api?.trace.getTracer('rlock')

// The hold spans open per lock handle, innermost last.
const holds = new WeakMap()

function failed(span, err) {
  span.recordException(err)
  span.setStatus({ code: api.SpanStatusCode.ERROR, message: err?.name ?? String(err) })
}

/**
 * Traces the acquisition `run()` starts for `lock`: `acquired(value)` says
 * whether `value` (what the promise resolves to) is a grant. The hold span
 * opens on a grant.
 */
function acquire(lock, run, acquired = () => true) {
  const span = tracer.startSpan('rlock.acquire', { attributes: { 'rlock.lock': lock.name } })
  // The API without an SDK (installed as another package's dependency, say)
  // records nothing: then the call goes out as untraced, with no extra hop.
  if (!span.isRecording()) return run()
  let promise
  try {
    promise = run()
  } catch (err) {
    failed(span, err)
    span.end()
    throw err
  }
  return promise.then(
    (value) => {
      const granted = acquired(value)
      const token = lock.fencingToken
      span.setAttribute('rlock.acquired', granted)
      if (granted && token !== null) span.setAttribute('rlock.fencing_token', token)
      span.end()
      if (granted) openHold(lock, token)
      return value
    },
    (err) => {
      span.setAttribute('rlock.acquired', false)
      failed(span, err)
      span.end()
      throw err
    },
  )
}

function openHold(lock, token) {
  const attributes = { 'rlock.lock': lock.name }
  if (token !== null) attributes['rlock.fencing_token'] = token
  const span = tracer.startSpan('rlock.hold', { attributes })
  let stack = holds.get(lock)
  if (stack === undefined) holds.set(lock, (stack = []))
  stack.push(span)
}

/** Closes the innermost hold span of `lock` (an error: how it ended). */
function closeHold(lock, err) {
  const span = holds.get(lock)?.pop()
  if (span === undefined) return
  if (err !== undefined) failed(span, err)
  span.end()
}

/** Traces the release `run()` starts for `lock`. */
function release(lock, run) {
  if (!holds.get(lock)?.length) return run()
  let promise
  try {
    promise = run()
  } catch (err) {
    closeHold(lock, err)
    throw err
  }
  return promise.then(
    (value) => {
      closeHold(lock)
      return value
    },
    (err) => {
      closeHold(lock, err)
      throw err
    },
  )
}

/** Runs `fn` with the innermost hold span of `lock` active. */
function withHold(lock, fn) {
  const span = holds.get(lock)?.at(-1)
  if (span === undefined) return fn()
  return api.context.with(api.trace.setSpan(api.context.active(), span), fn)
}

module.exports = { enabled: tracer !== undefined, acquire, release, closeHold, withHold }
