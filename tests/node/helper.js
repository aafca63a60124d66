'use strict'
// What the Node tests share: the servers of ../support/node/servers.js, a
// server (and a client on it) for a test file's tests, and waiting for a
// signal to abort.

const { after, before } = require('node:test')
const { RedisServer, RedisCluster, waitFor, freePort } = require('../support/node/servers.js')

/** Resolves with the signal's reason once it aborts; rejects after timeoutMs. */
function aborted(signal, timeoutMs = 5000) {
  if (signal.aborted) return Promise.resolve(signal.reason)
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`signal not aborted within ${timeoutMs} ms`)), timeoutMs)
    signal.addEventListener('abort', () => {
      clearTimeout(timer)
      resolve(signal.reason)
    })
  })
}

/**
 * Registers the file's hooks: before its tests a fresh server (`env.redis`)
 * and, unless `client` is false, a client on it (`env.client`); after them
 * both closed.
 */
function serve({ client = true } = {}) {
  const env = {}
  before(async () => {
    env.redis = await RedisServer.start()
    if (client) {
      const { Client } = require('../../node/index.js')
      env.client = await Client.connect(env.redis.url)
    }
  })
  after(async () => {
    await env.client?.close()
    await env.redis?.stop()
  })
  return env
}

module.exports = { RedisServer, RedisCluster, serve, waitFor, aborted, freePort }
