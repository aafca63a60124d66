//! Run-once jobs: a job that every process of a fleet schedules (a cron, a
//! timer) runs on one of them per period, as ShedLock's `lockAtLeastFor` /
//! `lockAtMostFor` do for Java. Whoever takes the job's lock in one attempt
//! runs it; the others skip it at once, never wait. The lock is taken for
//! `at_most` and not renewed: a process that dies while the job runs keeps
//! the others from running it until then. Once the job ends, its lock is
//! shortened to end `at_least` after the start, so a process whose schedule
//! fires a little later (its clock a little apart, a slow start) finds it
//! taken and skips that period instead of running the job a second time; if
//! that cannot be done, the lock stays as it was (until `at_most`): a job is
//! never run twice in a period for want of an answer from Redis.

use std::future::Future;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::time::Instant;

use crate::context::Client;
use crate::error::{Error, OptionName, Result};
use crate::lock::Lock;
use crate::options::{self, LockOptions, Unit, Wait, MAX_DURATION, MIN_LEASE};

/// How long a run-once job's lock is kept: at least `at_least` from its
/// start, at most `at_most` while the job runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobOptions {
    /// From the job's start, how long its lock stays taken even when the job
    /// ends sooner: the period in which no other process runs it again.
    pub at_least: Duration,
    /// How long the lock is taken for (not renewed): past it while the job
    /// runs, the lock is lost (and reported) and another process may run
    /// the job; a process that dies while its job runs holds it that long.
    pub at_most: Duration,
}

/// The default `at_most`.
pub const DEFAULT_AT_MOST: Duration = Duration::from_secs(3600);

impl Default for JobOptions {
    fn default() -> Self {
        JobOptions {
            at_least: Duration::ZERO,
            at_most: DEFAULT_AT_MOST,
        }
    }
}

impl JobOptions {
    pub fn at_least(mut self, at_least: Duration) -> Self {
        self.at_least = at_least;
        self
    }

    pub fn at_most(mut self, at_most: Duration) -> Self {
        self.at_most = at_most;
        self
    }

    /// Checks both bounds (before any I/O): `at_most` a lease (10 ms to a
    /// year), `at_least` at most `at_most`.
    pub fn check(&self) -> Result<()> {
        options::lease_duration(OptionName::AtMost, self.at_most)?;
        if self.at_least > self.at_most || self.at_least > MAX_DURATION {
            return Err(Error::invalid_option(
                OptionName::AtLeast,
                format!(
                    "must be at most at_most ({:?}), got {:?}",
                    self.at_most, self.at_least
                ),
            ));
        }
        Ok(())
    }

    /// The options of the job's lock: a lease of `at_most`, not renewed.
    fn lock(&self) -> LockOptions {
        LockOptions::default().ttl(self.at_most).auto_renew(false)
    }
}

/// A run-once job's bounds as a face gives them: numbers in `unit`, either
/// unset for its default; checked into [`JobOptions`] (the one place that
/// checks them, before any I/O).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct JobArgs {
    pub at_least: Option<f64>,
    pub at_most: Option<f64>,
    pub unit: Unit,
}

impl JobArgs {
    pub fn new(unit: Unit) -> Self {
        JobArgs {
            at_least: None,
            at_most: None,
            unit,
        }
    }

    pub fn check(&self) -> Result<JobOptions> {
        let mut options = JobOptions::default();
        if let Some(at_least) = self.at_least {
            options.at_least = options::option_span(OptionName::AtLeast, at_least, self.unit)?;
        }
        if let Some(at_most) = self.at_most {
            options.at_most = options::lease(OptionName::AtMost, at_most, self.unit)?;
        }
        options.check()?;
        Ok(options)
    }
}

/// A run-once job this process took: run it, then [`finish`](Self::finish).
/// Dropped unfinished (its caller went away before it ran, say), its lock
/// is given back in the background, so another process may run it.
#[derive(Debug)]
pub struct Job {
    /// None once finished.
    lock: Option<Lock>,
    started: Instant,
    at_least: Duration,
    fencing_token: u64,
}

impl Job {
    /// Strictly larger than the token of every earlier run of this job.
    pub fn fencing_token(&self) -> u64 {
        self.fencing_token
    }

    /// The job's lock (its name, whether it was lost meanwhile).
    pub fn lock(&self) -> &Lock {
        self.lock
            .as_ref()
            .expect("a job's lock is there until it finishes")
    }

    /// The job ended (however it ended): its lock is shortened to end
    /// `at_least` after the start, then ends in Redis on its own; or it is
    /// released now when that time has passed. [`Error::Lost`] when the lock
    /// was lost while the job ran (another process may have run it too);
    /// a connection error when Redis did not take the shorter lease, which
    /// then stays as it was (until `at_most`).
    pub async fn finish(mut self) -> Result<()> {
        let lock = self.lock.take().expect("finished once");
        let left = (self.started + self.at_least).saturating_duration_since(Instant::now());
        if left < MIN_LEASE && lock.lost().is_none() {
            return lock.finish().await;
        }
        lock.keep_for(left.max(MIN_LEASE)).await
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        if let Some(lock) = self.lock.take() {
            let runtime = lock.client().context.runtime().clone();
            runtime.spawn(async move { lock.release_persistently().await });
        }
    }
}

impl Client {
    /// Takes the run-once job `name` if no process holds it (one attempt,
    /// never a wait): `None` when another process runs it, or ran it less
    /// than its `at_least` ago. Bad options are refused before any I/O.
    pub async fn start_job(&self, name: &str, options: JobOptions) -> Result<Option<Job>> {
        options.check()?;
        // An owner of its own per run: a run never re-enters another's lock
        // (of this process either), whose `at_least` it must respect.
        let run = self.context.next_handle.fetch_add(1, Ordering::Relaxed);
        let lock = self.lock_as(name, options.lock(), &format!("job{run}"))?;
        let started = Instant::now();
        // Only "held by someone else" is a skip: a Redlock quorum that could
        // not be reached is an error, or every process would skip the job.
        let acquired = match lock.acquire(Wait::Once).await {
            Ok(acquired) => acquired,
            Err(Error::Busy { .. }) => {
                tracing::debug!(target: "rlock", job = name, "taken elsewhere within its period; skipped");
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        Ok(Some(Job {
            lock: Some(lock),
            started,
            at_least: options.at_least,
            fencing_token: acquired.fencing_token,
        }))
    }

    /// Runs `job` if this process takes the run-once job `name` (see
    /// [`start_job`](Self::start_job)), then keeps its lock as `options`
    /// say: `Some` with the job's output when it ran here, `None` when it
    /// was skipped. A lock lost while the job ran is [`Error::Lost`], which
    /// takes precedence over the output (as a `with` block's loss does).
    pub async fn run_once<F, Fut, T>(
        &self,
        name: &str,
        options: JobOptions,
        job: F,
    ) -> Result<Option<T>>
    where
        F: FnOnce(u64) -> Fut,
        Fut: Future<Output = T>,
    {
        let Some(started) = self.start_job(name, options).await? else {
            return Ok(None);
        };
        let output = job(started.fencing_token).await;
        started.finish().await?;
        Ok(Some(output))
    }
}
