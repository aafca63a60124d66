'use strict'
// client.runOnce(): a job every process schedules runs on one of them per
// period; the others resolve { ran: false } at once; the job's lock stays
// taken until atLeastMs after its start, also when the job rejects.

const assert = require('node:assert/strict')
const { test } = require('node:test')
const { Client } = require('../../node/index.js')
const { serve, waitFor } = require('./helper.js')

const env = serve()

const lockKey = (name) => `rlock:{${name}}`

test('of three clients scheduled at once one runs the job and the others skip at once', async () => {
  const clients = await Promise.all([1, 2, 3].map(() => Client.connect(env.redis.url)))
  let runs = 0
  try {
    const outcomes = await Promise.all(clients.map(async (client, i) => {
      const began = Date.now()
      const outcome = await client.runOnce('nightly-report', async ({ fencingToken }) => {
        runs += 1
        await new Promise((resolve) => setTimeout(resolve, 500))
        return `report ${i} under ${fencingToken}`
      }, { atLeastMs: 60000 })
      return { outcome, took: Date.now() - began }
    }))
    const ran = outcomes.filter(({ outcome }) => outcome.ran)
    assert.equal(ran.length, 1)
    assert.equal(runs, 1)
    assert.match(ran[0].outcome.value, /^report \d under \d+$/)
    assert.ok(ran[0].outcome.fencingToken >= 1)
    for (const { outcome, took } of outcomes.filter(({ outcome }) => !outcome.ran)) {
      assert.deepEqual(outcome, { ran: false })
      assert.ok(took < 400, `skipped after ${took} ms`)
    }
  } finally {
    await Promise.all(clients.map((c) => c.close()))
  }
})

test('the lock stays taken until atLeastMs after the start, also when the job rejects', async () => {
  const name = 'hourly'
  await assert.rejects(
    env.client.runOnce(name, async () => { throw new Error('the report failed') }, { atLeastMs: 2000 }),
    /the report failed/,
  )
  const left = Number(await env.redis.cli('PTTL', lockKey(name)))
  assert.ok(left > 0 && left <= 2000, `pttl ${left}`)
  assert.deepEqual(await env.client.runOnce(name, () => 'again', { atLeastMs: 2000 }), { ran: false })
  const next = await waitFor(async () => {
    const outcome = await env.client.runOnce(name, () => 'next period', { atLeastMs: 2000 })
    return outcome.ran ? outcome : undefined
  }, { timeoutMs: 10000, what: 'the next period' })
  assert.equal(next.value, 'next period')
})

test('bad arguments reject before any I/O', async () => {
  await assert.rejects(env.client.runOnce('x', () => {}, { atLeastMs: 20, atMostMs: 10 }), { code: 'ERR_INVALID_ARG', message: /atLeastMs/ })
  await assert.rejects(env.client.runOnce('x', () => {}, { atMostMs: 1 }), { code: 'ERR_INVALID_ARG', message: /atMostMs/ })
  await assert.rejects(env.client.runOnce('x', () => {}, { atLeast: 5 }), { code: 'ERR_INVALID_ARG', message: /did you mean `atLeastMs`/ })
  await assert.rejects(env.client.runOnce('x', 'not a function'), { code: 'ERR_INVALID_ARG' })
})
