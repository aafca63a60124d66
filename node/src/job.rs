//! `NativeJob`: a run-once job this process took (`client.startJob`). The JS
//! face runs the function, then `finish()`; what a run-once job is (one
//! attempt, the lock kept until `atLeastMs`) is the core's.

use std::sync::{Arc, Mutex, PoisonError};

use napi::bindgen_prelude::PromiseRaw;
use napi::Env;
use napi_derive::napi;
use rlock_core::Job;

use crate::error::Errors;
use crate::runtime;

#[napi]
pub struct NativeJob {
    /// None once finished.
    job: Arc<Mutex<Option<Job>>>,
    fencing_token: u64,
    errors: Arc<Errors>,
}

impl NativeJob {
    pub fn new(job: Job, errors: Arc<Errors>) -> Self {
        NativeJob {
            fencing_token: job.fencing_token(),
            job: Arc::new(Mutex::new(Some(job))),
            errors,
        }
    }
}

#[napi]
impl NativeJob {
    /// Strictly larger than every earlier run's token.
    #[napi(getter)]
    pub fn fencing_token(&self) -> f64 {
        self.fencing_token as f64
    }

    /// The job ended: its lock is kept until `atLeastMs` after its start (or
    /// released when that has passed); rejects `LockLostError` when it was
    /// lost meanwhile. Nothing more once finished.
    #[napi(catch_unwind)]
    pub fn finish<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, ()>> {
        let job = self
            .job
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let finished = async move {
            match job {
                Some(job) => Ok(job.finish().await?),
                None => Ok(()),
            }
        };
        runtime::promise(env, &self.errors, finished, |()| ())
    }
}
