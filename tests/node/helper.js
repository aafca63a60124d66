'use strict'
// Test support: a real redis-server on a free loopback port, and waiting on
// conditions with deadlines. The one place the Node tests start Redis.

const { spawn, execFile } = require('node:child_process')
const fs = require('node:fs')
const net = require('node:net')
const os = require('node:os')
const path = require('node:path')
const tls = require('node:tls')
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

/**
 * Resolves true when something answers RESP on the port (even NOAUTH), over
 * TLS trusting `ca` when given; false when the connection fails or closes.
 */
function answers(port, ca) {
  return new Promise((resolve) => {
    const socket =
      ca === undefined
        ? net.connect(port, '127.0.0.1', () => socket.write('PING\r\n'))
        : tls.connect({ port, host: '127.0.0.1', ca }, () => socket.write('PING\r\n'))
    const done = (up) => {
      socket.destroy()
      resolve(up)
    }
    socket.once('data', () => done(true))
    socket.once('error', () => done(false))
    socket.once('close', () => done(false))
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
    return RedisServer.#launch(extra, false)
  }

  /**
   * Starts a TLS-only server (`rediss://`) whose certificate, for 127.0.0.1,
   * is signed by a CA made for it: `server.caFile` is that CA's PEM file.
   */
  static async startTls(...extra) {
    return RedisServer.#launch(extra, true)
  }

  static async #launch(extra, useTls) {
    const port = await freePort()
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rlock-node-test-'))
    let listen = ['--port', String(port)]
    if (useTls) {
      await makeCertificates(dir)
      listen = ['--port', '0', '--tls-port', String(port), '--tls-cert-file', 'server.crt',
        '--tls-key-file', 'server.key', '--tls-ca-cert-file', 'ca.crt', '--tls-auth-clients', 'no']
    }
    const args = [...listen, '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir]
    const child = spawn('redis-server', [...args, ...extra], { stdio: 'ignore', cwd: dir })
    const server = new RedisServer(port, child, dir, extra, useTls)
    const failed = new Promise((_, reject) => {
      child.once('error', (e) => reject(new Error(`redis-server did not start (make test installs it): ${e.message}`)))
    })
    const ca = useTls ? fs.readFileSync(server.caFile) : undefined
    await Promise.race([failed, waitFor(() => answers(port, ca), { timeoutMs: 10000, what: 'redis-server start' })])
    return server
  }

  constructor(port, child, dir, extra, useTls) {
    this.port = port
    this.child = child
    this.dir = dir
    this.tls = useTls
    this.caFile = path.join(dir, 'ca.crt')
    this.password = extra.includes('--requirepass') ? extra[extra.indexOf('--requirepass') + 1] : undefined
  }

  get url() {
    return `${this.tls ? 'rediss' : 'redis'}://127.0.0.1:${this.port}`
  }

  get running() {
    return this.child.exitCode === null && this.child.signalCode === null
  }

  /** One command through `redis-cli`, for the test's own observations. */
  async cli(...command) {
    const auth = this.password === undefined ? [] : ['--no-auth-warning', '-a', this.password]
    const secure = this.tls ? ['--tls', '--cacert', this.caFile] : []
    const args = ['-p', String(this.port), ...secure, ...auth, ...command]
    const { stdout } = await run('redis-cli', args, { timeout: 10000 })
    return stdout.trim()
  }

  async stop() {
    if (this.running) {
      const exited = new Promise((resolve) => this.child.once('exit', resolve))
      this.child.kill('SIGKILL')
      await exited
    }
    fs.rmSync(this.dir, { recursive: true, force: true })
  }
}

/** A CA, and a server certificate for 127.0.0.1 and localhost it signed. */
async function makeCertificates(dir) {
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes']
  fs.writeFileSync(
    path.join(dir, 'server.ext'),
    'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\n' +
      'extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n',
  )
  const openssl = (...args) => run('openssl', args, { cwd: dir })
  await openssl('req', '-x509', ...ec, '-keyout', 'ca.key', '-out', 'ca.crt', '-subj', '/CN=rlock test CA', '-days', '2')
  await openssl('req', ...ec, '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=localhost')
  await openssl('x509', '-req', '-in', 'server.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial',
    '-out', 'server.crt', '-days', '2', '-extfile', 'server.ext')
}

/**
 * A Redis Cluster of `masters` masters (no replicas) on loopback, joined by
 * `redis-cli --cluster create`; ready once every node says cluster_state:ok.
 */
class RedisCluster {
  static async start(masters = 3) {
    const nodes = []
    try {
      for (let i = 0; i < masters; i++) {
        // The bus port defaults to port + 10000, which may not be free (or
        // exist) for a high port: choose it too.
        const bus = String(await freePort())
        nodes.push(await RedisServer.start('--cluster-enabled', 'yes', '--cluster-port', bus,
          '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', '1000'))
      }
      const addrs = nodes.map((n) => `127.0.0.1:${n.port}`)
      await run('redis-cli', ['--cluster', 'create', ...addrs, '--cluster-yes'])
      const ok = async () =>
        (await Promise.all(nodes.map((n) => n.cli('CLUSTER', 'INFO')))).every((i) => i.includes('cluster_state:ok'))
      await waitFor(ok, { timeoutMs: 30000, intervalMs: 50, what: 'cluster_state:ok' })
    } catch (err) {
      await Promise.all(nodes.map((n) => n.stop()))
      throw err
    }
    return new RedisCluster(nodes)
  }

  constructor(nodes) {
    this.nodes = nodes
  }

  get urls() {
    return this.nodes.map((n) => n.url)
  }

  /** The node serving `key`: the others answer MOVED. */
  async masterOf(key) {
    for (const node of this.nodes) {
      if (/^\d+$/.test(await node.cli('EXISTS', key))) return node
    }
    throw new Error(`no node serves ${key}`)
  }

  async stop() {
    await Promise.all(this.nodes.map((n) => n.stop()))
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

module.exports = { RedisServer, RedisCluster, serve, waitFor, aborted, freePort }
