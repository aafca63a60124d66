'use strict'
// The few plain Redis commands the demo and the interop tests send from Node
// beside the lock (the demo's database counts and logs its calls: INCR, RPUSH).
// The package itself has no general Redis client, so this is a minimal RESP2
// client: one socket, replies matched to commands in order, so concurrent
// callers can share it.

const net = require('node:net')

/** Connects to `redis://[[user]:password@]host[:port][/db]`. */
async function connect(url) {
  const u = new URL(url)
  if (u.protocol !== 'redis:') throw new Error(`demo client speaks redis:// only, not ${u.protocol}`)
  const socket = net.connect(Number(u.port || 6379), u.hostname || '127.0.0.1')
  await new Promise((resolve, reject) => {
    socket.once('connect', resolve)
    socket.once('error', reject)
  })
  socket.setNoDelay(true)
  const conn = new Connection(socket)
  if (u.password) {
    const user = decodeURIComponent(u.username)
    const password = decodeURIComponent(u.password)
    await conn.command(...(user ? ['AUTH', user, password] : ['AUTH', password]))
  }
  const db = u.pathname.replace(/^\//, '')
  if (db) await conn.command('SELECT', db)
  return conn
}

class Connection {
  constructor(socket) {
    this.socket = socket
    this.pending = []
    this.buffer = Buffer.alloc(0)
    socket.on('data', (chunk) => {
      this.buffer = Buffer.concat([this.buffer, chunk])
      for (;;) {
        const parsed = parse(this.buffer, 0)
        if (parsed === null) return
        this.buffer = this.buffer.subarray(parsed.end)
        const { resolve, reject } = this.pending.shift()
        if (parsed.value instanceof Error) reject(parsed.value)
        else resolve(parsed.value)
      }
    })
    socket.on('error', (err) => {
      for (const p of this.pending.splice(0)) p.reject(err)
    })
  }

  /** Sends one command; resolves with its reply (bulk strings as strings). */
  command(...args) {
    const parts = [`*${args.length}\r\n`]
    for (const a of args) {
      const s = String(a)
      parts.push(`$${Buffer.byteLength(s)}\r\n${s}\r\n`)
    }
    return new Promise((resolve, reject) => {
      this.pending.push({ resolve, reject })
      this.socket.write(parts.join(''))
    })
  }

  close() {
    this.socket.end()
  }
}

/** One RESP2 reply from `buf` at `at`: `{ value, end }`, or null if incomplete. */
function parse(buf, at) {
  const eol = buf.indexOf('\r\n', at)
  if (eol < 0) return null
  const line = buf.toString('utf8', at + 1, eol)
  const next = eol + 2
  switch (String.fromCharCode(buf[at])) {
    case '+':
      return { value: line, end: next }
    case '-':
      return { value: new Error(line), end: next }
    case ':':
      return { value: Number(line), end: next }
    case '$': {
      const len = Number(line)
      if (len < 0) return { value: null, end: next }
      if (buf.length < next + len + 2) return null
      return { value: buf.toString('utf8', next, next + len), end: next + len + 2 }
    }
    case '*': {
      const n = Number(line)
      const items = []
      let end = next
      for (let i = 0; i < n; i++) {
        const item = parse(buf, end)
        if (item === null) return null
        items.push(item.value)
        end = item.end
      }
      return { value: n < 0 ? null : items, end }
    }
    default:
      throw new Error(`unexpected RESP reply ${JSON.stringify(line)}`)
  }
}

module.exports = { connect }
