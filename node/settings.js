'use strict'
// Reading an ioredis instance's settings. Only what sets where and how to
// connect is read; everything else of ioredis (retries, key prefix, …)
// has no meaning here.

const native = require('./load.js')
const { invalidArg, makeError } = require('./error.js')
const { expect } = require('./options.js')

const IOREDIS = 'an ioredis Redis or Redis.Cluster instance'

/** Where an ioredis instance connects, as `{ urls, cluster, tlsCa }`. */
function ioredisTarget(redis) {
  const ok =
    redis !== null &&
    typeof redis === 'object' &&
    typeof redis.isCluster === 'boolean' &&
    redis.options !== null &&
    typeof redis.options === 'object'
  expect(ok, 'redis', IOREDIS, redis)
  if (redis.isCluster) {
    // Every node shares `redisOptions`; a startup node may name its own.
    const shared = redis.options.redisOptions ?? {}
    const nodes = redis.startupNodes
    expect(Array.isArray(nodes) && nodes.length > 0, 'startupNodes', 'a non-empty array', nodes)
    const urls = nodes.map((node, i) => {
      const settings = serverSettings({ ...shared, db: 0, ...clusterNode(node, i) }, `startupNodes[${i}]`)
      return native.urlFromSettings(settings, makeError)
    })
    return { urls, cluster: true, tlsCa: caOf(shared.tls) }
  }
  const o = redis.options
  expect(o.path === undefined || o.path === null, 'redis', 'an instance that connects over TCP (not a Unix socket)', o.path)
  if (Array.isArray(o.sentinels) && o.sentinels.length > 0) {
    // ioredis speaks TLS to the master only with enableTLSForSentinelMode.
    const tls = Boolean(o.enableTLSForSentinelMode && o.tls)
    const sentinels = o.sentinels.map((s, i) => {
      expect(s !== null && typeof s === 'object', `sentinels[${i}]`, 'an object', s)
      const sentinel = { host: '127.0.0.1', port: 26379, ...definedOnly(s) }
      const auth = { username: o.sentinelUsername, password: o.sentinelPassword, tls: o.sentinelTLS }
      return serverSettings({ ...sentinel, db: 0, ...auth }, `sentinels[${i}]`)
    })
    expect(typeof o.name === 'string', 'name', 'the master name (a string)', o.name)
    const { db, username, password } = database(o, 'options')
    const url = native.sentinelUrlFromSettings(o.name, sentinels, db, username, password, tls, makeError)
    return { urls: [url], cluster: false, tlsCa: tls ? caOf(o.tls) : undefined }
  }
  const url = native.urlFromSettings(serverSettings(o, 'options'), makeError)
  return { urls: [url], cluster: false, tlsCa: caOf(o.tls) }
}

/** A Cluster startup node as ioredis takes it: an object, `host:port` or a URL, or a port. */
function clusterNode(node, i) {
  if (typeof node === 'number') return { host: '127.0.0.1', port: node }
  if (typeof node === 'string') {
    let url
    try {
      url = new URL(/^rediss?:\/\//i.test(node) ? node : `redis://${node}`)
    } catch {
      throw invalidArg(TypeError, `startupNodes[${i}] is not a host:port or redis:// URL`)
    }
    const parsed = { host: url.hostname.replace(/^\[|\]$/g, ''), port: url.port === '' ? 6379 : Number(url.port) }
    if (url.username !== '') parsed.username = decodeURIComponent(url.username)
    if (url.password !== '') parsed.password = decodeURIComponent(url.password)
    if (url.protocol === 'rediss:') parsed.tls = {}
    return parsed
  }
  expect(node !== null && typeof node === 'object', `startupNodes[${i}]`, 'an object, a string or a port number', node)
  return { host: '127.0.0.1', port: 6379, ...definedOnly(node) }
}

/** The keys of `o` whose values are neither undefined nor null. */
function definedOnly(o) {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined && v !== null))
}

/** One server's settings (the core's `ServerSettings`) from ioredis-style options. */
function serverSettings(o, what) {
  const { host, port, tls } = o
  expect(typeof host === 'string', `${what}.host`, 'a string', host)
  expect(Number.isInteger(port) && port >= 0 && port <= 65535, `${what}.port`, 'a port number', port)
  return { host, port, ...database(o, what), tls: Boolean(tls) }
}

/** The database and the credentials of ioredis-style options (empty ones are none). */
function database({ db = 0, username, password }, what) {
  expect(Number.isInteger(db), `${what}.db`, 'a whole number', db)
  const text = (value, key) => {
    if (value === undefined || value === null || value === '') return undefined
    expect(typeof value === 'string', `${what}.${key}`, 'a string', value)
    return value
  }
  return { db, username: text(username, 'username'), password: text(password, 'password') }
}

/** The CA of ioredis' `tls` options, when it is one PEM. */
function caOf(tls) {
  const ca = Array.isArray(tls?.ca) && tls.ca.length === 1 ? tls.ca[0] : tls?.ca
  return typeof ca === 'string' || ca instanceof Uint8Array ? ca : undefined
}

module.exports = { ioredisTarget }
