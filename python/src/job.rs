//! `Job`: a run-once job this process took (`Client.start_job`). The Python
//! face runs the function, then `finish()`; what a run-once job is (one
//! attempt, the lock kept until `at_least`) is the core's.

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};

use pyo3::prelude::*;
use rlock_core::{validate, Job as CoreJob, JobArgs, Unit};

use crate::connection::ClientState;
use crate::runtime;

#[pyclass(frozen, module = "rlock._native", name = "Job")]
pub struct Job {
    /// None once finished.
    job: Mutex<Option<CoreJob>>,
    #[pyo3(get)]
    fencing_token: u64,
}

impl Job {
    fn take(&self) -> Option<CoreJob> {
        self.job
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }
}

/// Ends a taken job (see the core's `Job::finish`); nothing when finished
/// already.
async fn finish(job: Option<CoreJob>) -> rlock_core::Result<()> {
    match job {
        Some(job) => job.finish().await,
        None => Ok(()),
    }
}

#[pymethods]
impl Job {
    /// The job ended: its lock is kept until `at_least` after its start (or
    /// released when that has passed); `LockLost` when it was lost meanwhile.
    fn finish(&self, py: Python<'_>) -> PyResult<()> {
        runtime::wait(py, finish(self.take()))
    }

    fn finish_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        runtime::awaitable_task(py, finish(self.take()))
    }
}

/// Takes the run-once job `name` if no process holds it (the arguments
/// checked before any I/O): the job, or None when it ran elsewhere this
/// period.
pub(crate) fn start(
    state: &Arc<ClientState>,
    name: &str,
    at_least: Option<f64>,
    at_most: Option<f64>,
) -> rlock_core::Result<impl Future<Output = rlock_core::Result<Option<Job>>> + Send + 'static> {
    validate::name(name)?;
    let options = JobArgs {
        at_least,
        at_most,
        unit: Unit::Seconds,
    }
    .check()?;
    let connected = state.connected();
    let name = name.to_owned();
    Ok(async move {
        let taken = connected.await?.start_job(&name, options).await?;
        Ok(taken.map(|job| Job {
            fencing_token: job.fencing_token(),
            job: Mutex::new(Some(job)),
        }))
    })
}
