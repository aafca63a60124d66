//! `Lock` in the JS face: one JS `Lock` is one core `Lock` handle (its owner).
//! Each operation is one native call whose promise settles straight from the
//! runtime; waiting, renewal and loss detection all happen in the core.

use std::sync::{Arc, Mutex};

use napi::bindgen_prelude::{FnArgs, Function, PromiseRaw};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::{Env, Status};
use napi_derive::napi;
use rlock_core::{validate, Lock, OptionName, Unit, Wait};
use tokio::sync::watch;

use crate::error::{Errors, Failure};
use crate::runtime;

/// `(fencingToken, message, reason)` of a lost holding.
type LostNotice = FnArgs<(f64, String, &'static str)>;

/// Told when a watched holding is lost. Weak (unref'd): it never keeps Node
/// alive, and a notice that comes while the process exits is simply dropped.
type LostCallback = ThreadsafeFunction<LostNotice, (), LostNotice, Status, false, true>;

/// Whom to tell about lost holdings, once the JS face asked (`lock.signal`).
/// Shared by the handles of one owner's holding (a semaphore's, whatever
/// number of permits each takes), so a loss is told whichever acquired it.
pub(crate) type LostWatch = Arc<Mutex<Option<Arc<LostCallback>>>>;

#[napi]
pub struct NativeLock {
    lock: Lock,
    wait: Wait,
    errors: Arc<Errors>,
    on_lost: LostWatch,
}

impl NativeLock {
    pub(crate) fn new(lock: Lock, wait: Wait, errors: Arc<Errors>) -> Self {
        Self::watched_by(lock, wait, errors, LostWatch::default())
    }

    /// A handle whose losses go to `on_lost`, shared with other handles.
    pub(crate) fn watched_by(
        lock: Lock,
        wait: Wait,
        errors: Arc<Errors>,
        on_lost: LostWatch,
    ) -> Self {
        NativeLock {
            lock,
            wait,
            errors,
            on_lost,
        }
    }
}

#[napi]
impl NativeLock {
    /// Acquires as the lock's `timeoutMs` allows; `cancel` (from an
    /// `AbortSignal`) ends the wait. Dropping the core's acquire future never
    /// leaks a lock: an attempt in flight is released if it succeeds.
    #[napi(catch_unwind)]
    pub fn acquire<'env>(
        &self,
        env: &'env Env,
        cancel: Option<&WaitCancel>,
    ) -> napi::Result<PromiseRaw<'env, ()>> {
        let lock = self.lock.clone();
        let wait = self.wait;
        let on_lost = self.on_lost.clone();
        let mut cancelled = cancel.map(|c| c.tx.subscribe());
        let acquire = async move {
            let acquired = match cancelled.as_mut() {
                None => lock.acquire(wait).await?,
                Some(rx) => tokio::select! {
                    biased;
                    acquired = lock.acquire(wait) => acquired?,
                    _ = rx.wait_for(|c| *c) => return Err(Failure::Aborted),
                },
            };
            if acquired.count == 1 {
                watch_holding(&lock, &on_lost);
            }
            Ok(())
        };
        runtime::promise(env, &self.errors, acquire, |()| ())
    }

    /// One attempt: `true` when acquired.
    #[napi(catch_unwind)]
    pub fn try_acquire<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, bool>> {
        let lock = self.lock.clone();
        let on_lost = self.on_lost.clone();
        let attempt = async move {
            let acquired = lock.try_acquire().await?;
            if acquired.is_some_and(|a| a.count == 1) {
                watch_holding(&lock, &on_lost);
            }
            Ok(acquired.is_some())
        };
        runtime::promise(env, &self.errors, attempt, |held| held)
    }

    #[napi(catch_unwind)]
    pub fn release<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, ()>> {
        let lock = self.lock.clone();
        let release = async move { lock.release().await.map(|_| ()).map_err(Failure::from) };
        runtime::promise(env, &self.errors, release, |()| ())
    }

    /// Releases at the end of a scope (`client.using()`), reporting a lease
    /// lost during the scope.
    #[napi(catch_unwind)]
    pub fn finish<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, ()>> {
        let lock = self.lock.clone();
        let finish = async move { lock.finish().await.map_err(Failure::from) };
        runtime::promise(env, &self.errors, finish, |()| ())
    }

    /// `Symbol.asyncDispose`: like `finish`, and nothing when not held.
    #[napi(catch_unwind)]
    pub fn dispose<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, ()>> {
        let lock = self.lock.clone();
        let dispose = async move { lock.finish_if_held().await.map_err(Failure::from) };
        runtime::promise(env, &self.errors, dispose, |()| ())
    }

    /// Resets the lease to `ttl_ms` (the lock's ttl when absent).
    #[napi(catch_unwind)]
    pub fn extend<'env>(
        &self,
        env: &'env Env,
        ttl_ms: Option<f64>,
    ) -> napi::Result<PromiseRaw<'env, ()>> {
        let lock = self.lock.clone();
        let ttl = ttl_ms.map(|t| validate::lease(OptionName::Ttl, t, Unit::Millis));
        let extend = async move {
            // Checked before any I/O, reported as a rejection like every
            // other failure of an async method.
            let ttl = ttl.transpose()?;
            Ok(lock.extend(ttl).await?)
        };
        runtime::promise(env, &self.errors, extend, |()| ())
    }

    #[napi(catch_unwind)]
    pub fn is_locked<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, bool>> {
        let lock = self.lock.clone();
        let locked = async move { Ok(lock.locked().await?) };
        runtime::promise(env, &self.errors, locked, |held| held)
    }

    #[napi(catch_unwind)]
    pub fn is_owned<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, bool>> {
        let lock = self.lock.clone();
        let owned = async move { Ok(lock.owned().await?) };
        runtime::promise(env, &self.errors, owned, |held| held)
    }

    #[napi(getter, catch_unwind)]
    pub fn fencing_token(&self) -> Option<f64> {
        // Tokens count acquisitions of one name: far below 2^53.
        self.lock.fencing_token().map(|t| t as f64)
    }

    #[napi(getter, catch_unwind)]
    pub fn lost(&self) -> bool {
        self.lock.lost().is_some()
    }

    /// From now on, tells `callback` when a holding of this handle is lost
    /// (the current one, if any, and every later fresh acquisition).
    #[napi(catch_unwind)]
    pub fn watch_lost(&self, callback: Function<LostNotice, ()>) -> napi::Result<()> {
        let callback: LostCallback = callback
            .build_threadsafe_function()
            .callee_handled::<false>()
            .weak::<true>()
            .build()?;
        *self.on_lost.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(callback));
        watch_holding(&self.lock, &self.on_lost);
        Ok(())
    }
}

/// Watches the current holding of `lock` for loss, if the face asked to be told.
fn watch_holding(lock: &Lock, on_lost: &LostWatch) {
    let Some(callback) = on_lost.lock().unwrap_or_else(|p| p.into_inner()).clone() else {
        return;
    };
    let Some(fence) = lock.fencing_token() else {
        return;
    };
    let lost = lock.lost_signal();
    let name = lock.name().to_owned();
    let Ok(driver) = runtime::get() else {
        return; // no runtime, so no holding to watch either
    };
    driver.spawn(async move {
        // None: released first, nothing to tell.
        if let Some(reason) = lost.await {
            let message = rlock_core::Error::Lost { name, reason }.to_string();
            callback.call(
                (fence as f64, message, reason.as_str()).into(),
                ThreadsafeFunctionCallMode::NonBlocking,
            );
        }
    });
}

/// Cancels the waits it was passed to: the JS face makes one per
/// `acquire({ signal })` and calls `cancel()` when the signal aborts.
#[napi]
pub struct WaitCancel {
    tx: watch::Sender<bool>,
}

#[napi]
impl WaitCancel {
    #[napi(constructor)]
    #[allow(clippy::new_without_default)]
    pub fn new() -> Self {
        WaitCancel {
            tx: watch::channel(false).0,
        }
    }

    #[napi(catch_unwind)]
    pub fn cancel(&self) {
        self.tx.send_replace(true);
    }
}
