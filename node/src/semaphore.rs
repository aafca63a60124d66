//! `Semaphore` in the JS face: a JS `Lock` over this owner's core handle
//! taking one permit, and handles taking more made on demand. They share
//! one holding (an owner holds one number of permits at a time), so they
//! share whom to tell of its loss.

use std::sync::Arc;

use napi::bindgen_prelude::PromiseRaw;
use napi::Env;
use napi_derive::napi;
use rlock_core::{OptionName, Semaphore, Wait};

use crate::error::{Errors, Failure};
use crate::lock::{LostWatch, NativeLock};
use crate::options::permit_count;
use crate::runtime;

#[napi]
pub struct NativeSemaphore {
    semaphore: Semaphore,
    wait: Wait,
    errors: Arc<Errors>,
    on_lost: LostWatch,
}

impl NativeSemaphore {
    pub(crate) fn new(semaphore: Semaphore, wait: Wait, errors: Arc<Errors>) -> Self {
        NativeSemaphore {
            semaphore,
            wait,
            errors,
            on_lost: LostWatch::default(),
        }
    }
}

#[napi]
impl NativeSemaphore {
    /// This owner's handle taking `take` permits (checked before any I/O:
    /// a whole number from 1 to the size).
    #[napi(catch_unwind)]
    pub fn lock(&self, env: &Env, take: f64) -> napi::Result<NativeLock> {
        let lock = || {
            Ok::<_, Failure>(
                self.semaphore
                    .permits(permit_count(OptionName::Take, take)?)?,
            )
        };
        let lock = lock().map_err(|f| self.errors.to_js(env, f))?;
        let (wait, errors, on_lost) = (self.wait, self.errors.clone(), self.on_lost.clone());
        Ok(NativeLock::watched_by(lock, wait, errors, on_lost))
    }

    #[napi(getter, catch_unwind)]
    pub fn size(&self) -> u32 {
        self.semaphore.size()
    }

    /// Permits free now.
    #[napi(catch_unwind)]
    pub fn available<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, u32>> {
        let semaphore = self.semaphore.clone();
        let available = async move { Ok(semaphore.available().await?) };
        runtime::promise(env, &self.errors, available, |n| n)
    }

    /// Permits held now, by every holder.
    #[napi(catch_unwind)]
    pub fn held<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, u32>> {
        let semaphore = self.semaphore.clone();
        let held = async move { Ok(semaphore.held().await?) };
        runtime::promise(env, &self.errors, held, |n| n)
    }
}
