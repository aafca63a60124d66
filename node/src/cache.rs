//! `cached` in the JS face: one read of a cache entry (the core's
//! `Cache::read`) and the rebuild it may hand back. The JS face runs the
//! loader, encodes its value and tags it with a format, then stores it
//! through the rebuild; whom a miss makes wait and what a write may
//! overwrite are the core's.

use std::sync::{Arc, Mutex};

use napi::bindgen_prelude::{Buffer, PromiseRaw};
use napi::Env;
use napi_derive::napi;
use rlock_core::{Cache, Entry, Error, Read, Rebuild, Stored};

use crate::error::{Errors, Failure};
use crate::runtime;

/// What a read gives the JS face: a value to use now, and with `load` or
/// `refresh` a rebuild it must end (`store` or `fail`).
#[napi(object, object_from_js = false)]
pub struct CacheRead {
    /// `'hit'`, `'load'` (no value: run the loader now) or `'refresh'`
    /// (use the value, run the loader in the background).
    #[napi(ts_type = "'hit' | 'load' | 'refresh'")]
    pub kind: &'static str,
    /// None with `load`, and for a cached "nothing found".
    pub value: Option<Buffer>,
    /// The tag of the face that wrote the value (`bytes`, `text`, `json`,
    /// `pickle`).
    pub format: Option<String>,
    /// The fencing token the value was written under.
    pub fence: Option<f64>,
    pub rebuild: Option<NativeRebuild>,
}

/// Reads the entry `cache`, waiting for another caller's rebuild as its
/// options say.
pub fn read<'env>(
    env: &'env Env,
    errors: &Arc<Errors>,
    cache: Cache,
) -> napi::Result<PromiseRaw<'env, CacheRead>> {
    let read = async move { Ok(cache.read().await?) };
    let errors_of_rebuild = errors.clone();
    runtime::promise(env, errors, read, move |read| {
        let rebuild = |rb| NativeRebuild::new(rb, errors_of_rebuild);
        match read {
            Read::Hit(entry) => CacheRead::of("hit", Some(entry), None),
            Read::Load(rb) => CacheRead::of("load", None, Some(rebuild(rb))),
            Read::Refresh(entry, rb) => CacheRead::of("refresh", Some(entry), Some(rebuild(rb))),
        }
    })
}

impl CacheRead {
    fn of(kind: &'static str, entry: Option<Entry>, rebuild: Option<NativeRebuild>) -> Self {
        let (value, format, fence) = match entry {
            // Tokens count rebuilds of one key: far below 2^53.
            Some(e) => (
                e.value.map(Buffer::from),
                Some(e.format),
                Some(e.fence as f64),
            ),
            None => (None, None, None),
        };
        CacheRead {
            kind,
            value,
            format,
            fence,
            rebuild,
        }
    }
}

/// A rebuild this caller holds the lock of. Ended once, by `store` or
/// `fail`; dropped unended (collected by JS), the core gives the lock back
/// in the background and wakes the waiters.
#[napi]
pub struct NativeRebuild {
    rebuild: Mutex<Option<Rebuild>>,
    fence: u64,
    errors: Arc<Errors>,
}

impl NativeRebuild {
    fn new(rebuild: Rebuild, errors: Arc<Errors>) -> Self {
        NativeRebuild {
            fence: rebuild.fence(),
            rebuild: Mutex::new(Some(rebuild)),
            errors,
        }
    }

    /// The rebuild, taken to be ended: refused the second time.
    fn take(&self) -> Result<Rebuild, Failure> {
        let taken = self
            .rebuild
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        taken.ok_or_else(|| Failure::Core(Error::invalid("this rebuild has already ended")))
    }
}

#[napi]
impl NativeRebuild {
    /// The fencing token the value will be written under.
    #[napi(getter, catch_unwind)]
    pub fn fence(&self) -> f64 {
        self.fence as f64
    }

    /// Stores `value` (null: the loader found nothing) tagged `format`,
    /// then gives the lock back. Resolves with what became of it:
    /// `'written'`, or not written: `'lockLost'`, `'invalidated'`, `'newer'`.
    #[napi(
        catch_unwind,
        ts_return_type = "Promise<'written' | 'lockLost' | 'invalidated' | 'newer'>"
    )]
    pub fn store<'env>(
        &self,
        env: &'env Env,
        value: Option<Buffer>,
        format: String,
    ) -> napi::Result<PromiseRaw<'env, &'static str>> {
        // Copied here, on the JS thread: the Buffer refers to JS memory.
        let value = value.map(|v| v.to_vec());
        let rebuild = self.take();
        let store = async move {
            // Boxed: the store's future is too deep to lay out inline here.
            let stored = Box::pin(rebuild?.store(value.as_deref(), &format)).await?;
            Ok(match stored {
                Stored::Written => "written",
                Stored::LockLost => "lockLost",
                Stored::Invalidated => "invalidated",
                Stored::Newer => "newer",
                Stored::Unknown => "unknown",
            })
        };
        runtime::promise(env, &self.errors, store, |stored| stored)
    }

    /// The loader failed with `message`: gives the lock back and tells the
    /// callers waiting for this rebuild.
    #[napi(catch_unwind)]
    pub fn fail<'env>(
        &self,
        env: &'env Env,
        message: String,
    ) -> napi::Result<PromiseRaw<'env, ()>> {
        let rebuild = self.take();
        // Boxed, as in `store`.
        let fail = async move { Ok(Box::pin(rebuild?.fail(&message)).await?) };
        runtime::promise(env, &self.errors, fail, |()| ())
    }
}
