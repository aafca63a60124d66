'use strict'
// Test support: a real redis-server on a free loopback port, and waiting on
// conditions with deadlines. The one place the Node tests start Redis.

const { spawn, execFile } = require('node:child_process')
const fs = require('node:fs')
const net = require('node:net')
const os = require('node:os')
const path = require('node:path')
const { after, before } = require('node:test')
const { promisify } = require('node:util')

const run = promisify(execFile)

function freePort() {
  return new Promise((resolve, reject) => {
    const probe = net.createServer()
    probe.once('error', reject)
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address()
      probe.close(() => resolve(port))
    })
  })
}

/** Resolves true when something answers RESP on the port (even NOAUTH). */
function answers(port) {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1')
    const done = (up) => {
      socket.destroy()
      resolve(up)
    }
    socket.once('data', () => done(true))
    socket.once('error', () => done(false))
    socket.once('connect', () => socket.write('PING\r\n'))
  })
}

/**
 * Polls `condition` (sync or async) until it returns a truthy value, which it
 * resolves with; rejects once `timeoutMs` passed without one.
 */
async function waitFor(condition, { timeoutMs = 5000, intervalMs = 10, what = 'condition' } = {}) {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await condition()
    if (value) return value
    if (Date.now() >= deadline) throw new Error(`${what} not met within ${timeoutMs} ms`)
    await new Promise((resolve) => setTimeout(resolve, intervalMs))
  }
}

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

class RedisServer {
  /** Starts `redis-server` with extra arguments (say `--requirepass`). */
  static async start(...extra) {
    const port = await freePort()
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rlock-node-test-'))
    const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir]
    const child = spawn('redis-server', [...args, ...extra], { stdio: 'ignore' })
    const server = new RedisServer(port, child, dir, extra)
    const failed = new Promise((_, reject) => {
      child.once('error', (e) => reject(new Error(`redis-server did not start (make test installs it): ${e.message}`)))
    })
    await Promise.race([failed, waitFor(() => answers(port), { timeoutMs: 10000, what: 'redis-server start' })])
    return server
  }

  constructor(port, child, dir, extra) {
    this.port = port
    this.child = child
    this.dir = dir
    this.password = extra.includes('--requirepass') ? extra[extra.indexOf('--requirepass') + 1] : undefined
  }

  get url() {
    return `redis://127.0.0.1:${this.port}`
  }

  /** One command through `redis-cli`, for the test's own observations. */
  async cli(...command) {
    const auth = this.password === undefined ? [] : ['--no-auth-warning', '-a', this.password]
    const { stdout } = await run('redis-cli', ['-p', String(this.port), ...auth, ...command])
    return stdout.trim()
  }

  async stop() {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      const exited = new Promise((resolve) => this.child.once('exit', resolve))
      this.child.kill('SIGKILL')
      await exited
    }
    fs.rmSync(this.dir, { recursive: true, force: true })
  }
}

/**
 * Registers the file's hooks: before its tests a fresh server and a client on
 * it (`env.redis`, `env.client`), after them both closed.
 */
function serve() {
  const { Client } = require('../../node/index.js')
  const env = {}
  before(async () => {
    env.redis = await RedisServer.start()
    env.client = await Client.connect(env.redis.url)
  })
  after(async () => {
    await env.client?.close()
    await env.redis?.stop()
  })
  return env
}

module.exports = { RedisServer, serve, waitFor, aborted, freePort }
