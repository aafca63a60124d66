'use strict'
// A worker thread of event-loop.test.js: waits for a held lock, takes it,
// releases it, and exits (exit code 0 only if all of that worked).

const { parentPort, workerData } = require('node:worker_threads')
const { Client } = require('../../node/index.js')

async function main() {
  const client = await Client.connect(workerData.url)
  const lock = client.lock(workerData.name)
  if (await lock.tryAcquire()) throw new Error('the lock was free while it was held')
  const acquired = lock.acquire()
  parentPort.postMessage('waiting')
  await acquired
  await lock.release()
  await client.close()
}

main().catch((e) => {
  console.error(e)
  process.exitCode = 1
})
