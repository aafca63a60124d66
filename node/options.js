'use strict'

const native = require('./load.js')
const { invalidArg } = require('./error.js')

// Type checks: the core checks values, but it can only be handed the types
// it expects. Messages name the type, never the value (it may be a URL with
// a password).
function describe(value) {
  return value === null ? 'null' : typeof value
}

function expect(ok, what, expected, value) {
  if (!ok) throw invalidArg(TypeError, `${what} must be ${expected}, got ${describe(value)}`)
}

// A lone UTF-16 surrogate cannot cross into Rust intact (it becomes U+FFFD),
// so two different names would be one lock: refuse them as Python does.
const LONE_SURROGATE = /\p{Cs}/u

function expectName(name, what = 'name') {
  expect(typeof name === 'string', what, 'a string', name)
  expect(!LONE_SURROGATE.test(name), what, 'well-formed text (no lone UTF-16 surrogate)', name)
}

// The keys each options object takes. A key outside them is refused, never
// ignored: `{ timeout: 300 }` would otherwise wait forever. The lock options
// are the fields the native side reads (node/src/options.rs).
const LOCK_OPTIONS = native.lockOptionNames()
const USING_OPTIONS = [...LOCK_OPTIONS, 'signal']
const ACQUIRE_OPTIONS = ['signal']
const SEMAPHORE_OPTIONS = [...LOCK_OPTIONS, 'permits']
const PERMITS_OPTIONS = [...ACQUIRE_OPTIONS, 'permits']
const CACHE_OPTIONS = native.cacheOptionNames()
const JOB_OPTIONS = native.jobOptionNames()
const CONNECT_OPTIONS = ['prefix', 'cluster', 'tlsCa']
const FROM_IOREDIS_OPTIONS = ['prefix', 'tlsCa']

/** `options` as an object whose keys are all `known` ({} when absent). */
function optionsObject(options, what, known) {
  if (options === undefined || options === null) return {}
  expect(typeof options === 'object', what, 'an object', options)
  for (const key of Object.keys(options)) {
    if (!known.includes(key)) throw invalidArg(TypeError, unknownOption(key, known))
  }
  return options
}

function unknownOption(key, known) {
  const near = native.closestOption(key, known)
  const hint = near == null ? `the options are ${known.map((k) => `\`${k}\``).join(', ')}` : `did you mean \`${near}\`?`
  return `unknown option \`${key}\` (${hint})`
}

/** One URL or an array of them, as the native side takes it. */
function urlList(url) {
  if (url === undefined || url === null) return undefined
  if (typeof url === 'string') return [url]
  expect(Array.isArray(url), 'url', 'a string or an array of strings', url)
  url.forEach((u, i) => expect(typeof u === 'string', `url[${i}]`, 'a string', u))
  return url
}

function pem(tlsCa) {
  if (tlsCa === undefined || tlsCa === null) return undefined
  if (typeof tlsCa === 'string') return Buffer.from(tlsCa)
  expect(tlsCa instanceof Uint8Array, 'tlsCa', 'a PEM string or Buffer', tlsCa)
  return Buffer.from(tlsCa.buffer, tlsCa.byteOffset, tlsCa.byteLength)
}

function checkSignal(signal) {
  const ok =
    signal !== null &&
    typeof signal === 'object' &&
    typeof signal.aborted === 'boolean' &&
    typeof signal.addEventListener === 'function'
  expect(ok, 'signal', 'an AbortSignal', signal)
}

/** The options of an acquisition (keys among `known`), its signal checked. */
function acquireOptions(options, known) {
  const checked = optionsObject(options, 'options', known)
  if (checked.signal !== undefined) checkSignal(checked.signal)
  return checked
}

module.exports = {
  describe,
  expect,
  expectName,
  LOCK_OPTIONS,
  USING_OPTIONS,
  ACQUIRE_OPTIONS,
  SEMAPHORE_OPTIONS,
  PERMITS_OPTIONS,
  CACHE_OPTIONS,
  JOB_OPTIONS,
  CONNECT_OPTIONS,
  FROM_IOREDIS_OPTIONS,
  optionsObject,
  urlList,
  pem,
  acquireOptions,
}
