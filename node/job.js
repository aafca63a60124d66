'use strict'

/**
 * Runs `fn` as the run-once job `job` this process took (`startJob`), or
 * answers at once when it took none (null: another process holds the job).
 */
async function runJob(job, fn) {
  if (job === null) return { ran: false }
  const fencingToken = job.fencingToken
  let value
  try {
    value = await fn({ fencingToken })
  } catch (e) {
    // The job's lock is kept all the same: the next run is next period's.
    await job.finish().catch(() => {})
    throw e
  }
  await job.finish()
  return { ran: true, value, fencingToken }
}

module.exports = { runJob }
