'use strict'
// What the Node tests share: the servers of ../support/node/servers.js, a
// server (and a client on it) for a test file's tests, waiting for a signal
// to abort or a promise to settle, and running a script in a process of its
// own.

const { spawn } = require('node:child_process')
const path = require('node:path')
const { after, before } = require('node:test')
const { RedisServer, RedisCluster, RedisSentinel, waitFor, freePort } = require('../support/node/servers.js')

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

/** Settles as `promise` does, or rejects once `ms` passed without it settling. */
function within(promise, ms, what) {
  let timer
  const deadline = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not settle within ${ms} ms`)), ms)
  })
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer))
}

const entry = path.join(__dirname, '..', '..', 'node', 'index.js')

/**
 * Runs `body`, an async function's source called with `url`, in a child
 * Node with the package's `Client` in scope; resolves with its
 * exit and output, rejects when it has not exited within `timeoutMs`.
 */
function runChild(body, url, timeoutMs = 10000) {
  const script = `
    const { Client } = require(${JSON.stringify(entry)})
    ;(${body})(${JSON.stringify(url)}).catch((e) => { console.error(e); process.exit(3) })
  `
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'pipe'] })
    let output = ''
    child.stdout.on('data', (d) => (output += d))
    child.stderr.on('data', (d) => (output += d))
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      reject(new Error(`the child did not exit within ${timeoutMs} ms:\n${output}`))
    }, timeoutMs)
    child.on('exit', (code, signal) => {
      clearTimeout(timer)
      resolve({ code, signal, output })
    })
  })
}

module.exports = { RedisServer, RedisCluster, RedisSentinel, serve, waitFor, aborted, within, freePort, runChild }
