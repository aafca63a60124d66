'use strict'
// A real redis-server on a free loopback port (plain or TLS-only), a Redis
// Cluster built from such servers, a Sentinel watching one, and waiting on a
// condition until a deadline. The one place the Node tests start Redis.

const { spawn, execFile, execFileSync } = require('node:child_process')
const fs = require('node:fs')
const net = require('node:net')
const os = require('node:os')
const path = require('node:path')
const tls = require('node:tls')
const { promisify } = require('node:util')

const run = promisify(execFile)

/**
 * The one name of the server binary: Debian's redis-server unless
 * RLOCK_REDIS_SERVER names another (`make test-matrix` points it at Redis 6.2,
 * 8.2 and Valkey 8.1 in .servers/), for every server, Sentinel included.
 */
const SERVER = process.env.RLOCK_REDIS_SERVER || 'redis-server'

let version
/** SERVER's [major, minor], from `--version` (Valkey numbers its own: every Valkey has what Redis 7.2 has). */
function serverVersion() {
  if (version === undefined) {
    const out = execFileSync(SERVER, ['--version'], { encoding: 'utf8', timeout: 10000 })
    const found = /v=(\d+)\.(\d+)/.exec(out)
    if (found === null) throw new Error(`${SERVER} --version names no version: ${out}`)
    version = [Number(found[1]), Number(found[2])]
  }
  return version
}

/**
 * Throws, saying why, on a server too old for the lock's Cluster mode: sharded
 * pub/sub (its release messages) and `--cluster-port` came with Redis 7.0
 * (`make test-matrix` leaves the Cluster tests out on 6.2).
 */
function requireClusterSupport() {
  const [major, minor] = serverVersion()
  if (major < 7) {
    throw new Error(`a Redis Cluster here needs Redis 7.0 or later (sharded pub/sub): ${SERVER} is ${major}.${minor}`)
  }
}

/**
 * A loopback port nothing listens on now. Another process may take it before
 * the caller binds it: whoever starts a server there must be ready to try
 * again on another.
 */
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
 * TLS trusting `ca` when given; false when the connection fails, closes or
 * stays silent for a second (whatever took the port may never answer).
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
    socket.setTimeout(1000, () => done(false))
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

/** How many times a start may find its port taken before it gives up. */
const START_TRIES = 5
/** The server's output, in its directory: why it exited, when it did. */
const LOG = 'server.log'

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
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rlock-node-test-'))
    if (useTls) await makeCertificates(dir)
    // Test files run in parallel: a port found free can be bound by another
    // file's server first, and redis-server then exits. It starts again on
    // another port.
    try {
      for (let tries = 0; tries < START_TRIES; tries++) {
        const server = new RedisServer(await freePort(), dir, extra, useTls)
        if (await server.#spawn()) return server
      }
    } catch (err) {
      fs.rmSync(dir, { recursive: true, force: true })
      throw err
    }
    fs.rmSync(dir, { recursive: true, force: true })
    throw new Error(`redis-server found its port taken ${START_TRIES} times in a row`)
  }

  constructor(port, dir, extra, useTls) {
    this.port = port
    this.child = undefined
    this.dir = dir
    this.extra = extra
    this.tls = useTls
    this.caFile = path.join(dir, 'ca.crt')
    this.password = extra.includes('--requirepass') ? extra[extra.indexOf('--requirepass') + 1] : undefined
  }

  /**
   * Starts the process and waits until it answers; false when it exited first
   * because its port was taken. Any other reason to exit (an option this
   * server does not know, a build without TLS) rejects at once, with the
   * server's last words.
   */
  async #spawn() {
    const port = String(this.port)
    const listen = this.tls
      ? ['--port', '0', '--tls-port', port, '--tls-cert-file', 'server.crt', '--tls-key-file', 'server.key',
          '--tls-ca-cert-file', 'ca.crt', '--tls-auth-clients', 'no']
      : ['--port', port]
    const args = [...listen, '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', this.dir]
    const logPath = path.join(this.dir, LOG)
    const log = fs.openSync(logPath, 'w')
    const child = spawn(SERVER, [...args, ...this.extra], { stdio: ['ignore', log, log], cwd: this.dir })
    fs.closeSync(log)
    this.child = child
    const failed = new Promise((_, reject) => {
      child.once('error', (e) => reject(new Error(`redis-server did not start (make test installs it): ${e.message}`)))
    })
    const ca = this.tls ? fs.readFileSync(this.caFile) : undefined
    // Whoever answers, it is this server only while this one runs.
    const settled = async () => {
      const answered = await answers(this.port, ca)
      if (!this.running) return 'exited'
      return answered ? 'up' : undefined
    }
    const state = await Promise.race([failed, waitFor(settled, { timeoutMs: 10000, what: 'redis-server start' })])
    if (state === 'exited') {
      const said = fs.readFileSync(logPath, 'utf8').trim()
      if (!said.includes('Address already in use')) {
        throw new Error(`${SERVER} exited at start: ${said.split('\n').slice(-2).join(' / ') || '(it said nothing)'}`)
      }
    }
    return state === 'up'
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

  /** The connections the server counts, but the one asking. */
  async connections() {
    const list = await this.cli('CLIENT', 'LIST')
    return list.split('\n').filter((line) => !line.includes('cmd=client|list')).length
  }

  /** Kills the server (SIGKILL: no goodbye to clients) and removes its directory. */
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
    requireClusterSupport()
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
      // redis-cli waits for the nodes to agree with no deadline of its own.
      await run('redis-cli', ['--cluster', 'create', ...addrs, '--cluster-yes'], { timeout: 60000 })
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
 * A Sentinel (`redis-server --sentinel`) on loopback watching `primary`, a
 * RedisServer, as the master named `name` (with the primary's password, if
 * it has one); ready once it names that master's address.
 */
class RedisSentinel extends RedisServer {
  static async start(primary, name) {
    for (let tries = 0; tries < START_TRIES; tries++) {
      const port = await freePort()
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rlock-node-sentinel-'))
      const auth = primary.password === undefined ? '' : `sentinel auth-pass ${name} ${primary.password}\n`
      fs.writeFileSync(
        path.join(dir, 'sentinel.conf'),
        `port ${port}\nbind 127.0.0.1\ndir ${dir}\nsentinel monitor ${name} 127.0.0.1 ${primary.port} 1\n${auth}`,
      )
      const child = spawn(SERVER, ['sentinel.conf', '--sentinel'], { stdio: 'ignore', cwd: dir })
      const sentinel = new RedisSentinel(port, dir, child)
      const master = async () => {
        if (!sentinel.running) return 'exited'
        const addr = await sentinel.cli('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', name).catch(() => '')
        return addr.includes(String(primary.port)) ? 'up' : undefined
      }
      // Another file's server may take the port first: then it starts again.
      if ((await waitFor(master, { timeoutMs: 10000, intervalMs: 50, what: 'Sentinel start' })) === 'up') return sentinel
      await sentinel.stop()
    }
    throw new Error(`redis-server --sentinel found its port taken ${START_TRIES} times in a row`)
  }

  /** A redis-server process like any other (`running`, `cli`, `stop`), in Sentinel mode. */
  constructor(port, dir, child) {
    super(port, dir, [], false)
    this.child = child
  }
}

module.exports = { RedisServer, RedisCluster, RedisSentinel, waitFor, freePort }
