'use strict'
// OpenTelemetry spans, with the SDK's in-memory exporter: an acquisition is
// an `rlock.acquire` span under the active one, `using()` an `rlock.hold`
// span active in its callback; a refusal and a loss show on their spans;
// and without `@opentelemetry/api` nothing is traced.

const assert = require('node:assert/strict')
const { test } = require('node:test')
const api = require('@opentelemetry/api')
const { AsyncLocalStorageContextManager } = require('@opentelemetry/context-async-hooks')
const { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } = require('@opentelemetry/sdk-trace-base')
const { serve, runChild } = require('./helper.js')

const exporter = new InMemorySpanExporter()
const provider = new BasicTracerProvider()
provider.addSpanProcessor(new SimpleSpanProcessor(exporter))
api.context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable())
api.trace.setGlobalTracerProvider(provider)

const env = serve()

function named(name) {
  return exporter.getFinishedSpans().filter((s) => s.name === name)
}

test('using() is an acquire span, then a hold span active in the callback', async () => {
  exporter.reset()
  const app = api.trace.getTracer('app')
  let token
  await app.startActiveSpan('request', async (request) => {
    await env.client.using('tr:using', async (signal, lock) => {
      token = lock.fencingToken
      await app.startActiveSpan('rebuild', async (s) => s.end())
    })
    request.end()
  })
  const [acquire] = named('rlock.acquire')
  const [hold] = named('rlock.hold')
  const [rebuild] = named('rebuild')
  const [request] = named('request')
  assert.equal(acquire.parentSpanId, request.spanContext().spanId)
  assert.equal(hold.parentSpanId, request.spanContext().spanId)
  assert.equal(rebuild.parentSpanId, hold.spanContext().spanId)
  assert.equal(acquire.attributes['rlock.lock'], 'tr:using')
  assert.equal(acquire.attributes['rlock.acquired'], true)
  assert.equal(acquire.attributes['rlock.fencing_token'], token)
  assert.equal(hold.attributes['rlock.fencing_token'], token)
  assert.equal(hold.status.code, api.SpanStatusCode.UNSET)
})

test('explicit acquire and release bracket a hold span; a refusal opens none', async () => {
  exporter.reset()
  const lock = env.client.lock('tr:explicit')
  await lock.acquire()
  assert.equal(await env.client.lock('tr:explicit').tryAcquire(), false)
  await lock.release()
  const acquired = named('rlock.acquire').map((s) => s.attributes['rlock.acquired'])
  assert.deepEqual(acquired.sort(), [false, true])
  assert.equal(named('rlock.hold').length, 1)
  const timedOut = env.client.lock('tr:explicit', { timeoutMs: 0 })
  await lock.acquire()
  await assert.rejects(timedOut.acquire())
  await lock.release()
  const failed = named('rlock.acquire').filter((s) => s.status.code === api.SpanStatusCode.ERROR)
  assert.equal(failed.length, 1, 'the timeout is an error on its span')
})

test('a lease lost inside using() marks the hold span as an error', async () => {
  exporter.reset()
  await assert.rejects(
    env.client.using('tr:lost', { ttlMs: 600 }, async (signal) => {
      await env.redis.cli('DEL', 'rlock:{tr:lost}')
      await new Promise((resolve) => signal.addEventListener('abort', resolve))
    }),
  )
  const [hold] = named('rlock.hold')
  assert.equal(hold.status.code, api.SpanStatusCode.ERROR)
})

test('without @opentelemetry/api installed, locks work and nothing is traced', async () => {
  const out = await runChild(
    `async (url) => {
    const Module = require('node:module')
    const resolve = Module._resolveFilename
    Module._resolveFilename = function (request, ...rest) {
      if (request.startsWith('@opentelemetry/')) throw Object.assign(new Error('not found'), { code: 'MODULE_NOT_FOUND' })
      return resolve.call(this, request, ...rest)
    }
    for (const k of Object.keys(require.cache)) delete require.cache[k]
    const { Client } = require(${JSON.stringify(require.resolve('../../node/index.js'))})
    const tracing = require(${JSON.stringify(require.resolve('../../node/tracing.js'))})
    const c = await Client.connect(url)
    await c.using('untraced', async (signal, lock) => console.log('held', lock.fencingToken > 0, tracing.enabled))
    await c.close()
    }`,
    env.redis.url,
  )
  assert.equal(out.code, 0, out.output)
  assert.equal(out.output.trim(), 'held true false')
})
