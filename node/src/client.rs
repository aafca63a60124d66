//! `Client` in the JS face: connecting, making locks, closing.

use std::sync::Arc;

use napi::bindgen_prelude::PromiseRaw;
use napi::Env;
use napi_derive::napi;
use rlock_core::{Client, ClientOptions, LockOptions, Unit, Wait};

use crate::error::{ErrorFactory, Errors, Failure};
use crate::lock::NativeLock;

/// A connection to one Redis deployment, shared by the locks made from it.
#[napi]
pub struct NativeClient {
    inner: Client,
    errors: Arc<Errors>,
}

/// Connects to `url` (`REDIS_URL` or the default when absent). `make_error`
/// is the face's error factory; every error of this client is built by it.
#[napi(catch_unwind)]
pub fn connect<'env>(
    env: &'env Env,
    url: Option<String>,
    prefix: Option<String>,
    make_error: ErrorFactory,
) -> napi::Result<PromiseRaw<'env, NativeClient>> {
    let errors = Errors::new(make_error);
    let url = url.unwrap_or_else(Client::default_url);
    let options = match prefix {
        Some(p) => ClientOptions::default().prefix(p),
        None => ClientOptions::default(),
    };
    errors.clone().promise(
        env,
        async move { Ok(Client::connect_with(&url, options).await?) },
        move |inner| NativeClient { inner, errors },
    )
}

#[napi]
impl NativeClient {
    /// A lock owned by a new handle. Every option is checked here, before
    /// any I/O, so bad options throw at `client.lock()`.
    #[napi(catch_unwind)]
    pub fn lock(
        &self,
        env: &Env,
        name: String,
        ttl_ms: Option<f64>,
        auto_renew: bool,
        max_hold_ms: Option<f64>,
        timeout_ms: Option<f64>,
    ) -> napi::Result<NativeLock> {
        self.make_lock(&name, ttl_ms, auto_renew, max_hold_ms, timeout_ms)
            .map_err(|f| self.errors.to_js(env, f))
    }

    fn make_lock(
        &self,
        name: &str,
        ttl_ms: Option<f64>,
        auto_renew: bool,
        max_hold_ms: Option<f64>,
        timeout_ms: Option<f64>,
    ) -> Result<NativeLock, Failure> {
        let options = LockOptions::parse(ttl_ms, auto_renew, max_hold_ms, Unit::Millis)
            .map_err(Failure::OutOfRange)?;
        let wait = Wait::parse(true, timeout_ms, Unit::Millis).map_err(Failure::OutOfRange)?;
        let lock = self.inner.lock_with(name, options)?;
        Ok(NativeLock::new(lock, wait, self.errors.clone()))
    }

    /// Stops the renewal loop and the pub/sub connection; held locks expire
    /// with their lease.
    #[napi(catch_unwind)]
    pub fn close(&self) {
        self.inner.close();
    }
}
