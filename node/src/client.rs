//! `Client` in the JS face: connecting, making locks, closing.

use std::sync::Arc;

use napi::bindgen_prelude::{Buffer, PromiseRaw};
use napi::Env;
use napi_derive::napi;
use rlock_core::{validate, Client, ClientOptions, Error, LockOptions, Unit, Wait};

use crate::error::{ErrorFactory, Errors, Failure};
use crate::lock::NativeLock;
use crate::runtime;

/// A connection to one Redis deployment, shared by the locks made from it.
#[napi]
pub struct NativeClient {
    inner: Client,
    errors: Arc<Errors>,
}

/// Connects to `urls` (`REDIS_URL` or the default when absent): one URL,
/// several masters (Redlock), or with `cluster` the seeds of a Cluster.
/// `tls_ca` is the PEM of a private CA for `rediss://`. `make_error` is the
/// face's error factory; every error of this client is built by it.
#[napi(catch_unwind)]
pub fn connect<'env>(
    env: &'env Env,
    urls: Option<Vec<String>>,
    prefix: Option<String>,
    cluster: bool,
    tls_ca: Option<Buffer>,
    make_error: ErrorFactory,
) -> napi::Result<PromiseRaw<'env, NativeClient>> {
    let errors = Errors::new(make_error);
    let urls = urls.unwrap_or_else(|| vec![Client::default_url()]);
    let mut options = ClientOptions::default()
        .cluster(cluster)
        .tls_ca_pem(tls_ca.map(|pem| pem.to_vec()));
    if let Some(p) = prefix {
        options = options.prefix(p);
    }
    runtime::promise(
        env,
        &errors.clone(),
        async move { Ok(Client::connect_urls(&urls, options).await?) },
        move |inner| NativeClient { inner, errors },
    )
}

#[napi]
impl NativeClient {
    /// A lock owned by a new handle. Every option is checked here, before
    /// any I/O, so bad options throw at `client.lock()`.
    #[napi(catch_unwind)]
    #[allow(clippy::too_many_arguments)] // the face's options, one each
    pub fn lock(
        &self,
        env: &Env,
        name: String,
        ttl_ms: Option<f64>,
        auto_renew: bool,
        max_hold_ms: Option<f64>,
        timeout_ms: Option<f64>,
        sync_replicas: Option<f64>,
        fair: bool,
        queue_after_ms: Option<f64>,
    ) -> napi::Result<NativeLock> {
        self.make_lock(
            &name,
            ttl_ms,
            auto_renew,
            max_hold_ms,
            timeout_ms,
            sync_replicas,
            fair,
            queue_after_ms,
        )
        .map_err(|f| self.errors.to_js(env, f))
    }

    #[allow(clippy::too_many_arguments)] // the face's options, one each
    fn make_lock(
        &self,
        name: &str,
        ttl_ms: Option<f64>,
        auto_renew: bool,
        max_hold_ms: Option<f64>,
        timeout_ms: Option<f64>,
        sync_replicas: Option<f64>,
        fair: bool,
        queue_after_ms: Option<f64>,
    ) -> Result<NativeLock, Failure> {
        let replicas = sync_replicas
            .map(replica_count)
            .transpose()
            .map_err(Failure::OutOfRange)?;
        let options = LockOptions::parse(ttl_ms, auto_renew, max_hold_ms, Unit::Millis)
            .map_err(Failure::OutOfRange)?
            .sync_replicas(replicas)
            .fair(fair)
            .queue_after_in(queue_after_ms, Unit::Millis)
            .map_err(Failure::OutOfRange)?;
        let wait = Wait::parse(true, timeout_ms, Unit::Millis).map_err(Failure::OutOfRange)?;
        let lock = self.inner.lock_with(name, options)?;
        Ok(NativeLock::new(lock, wait, self.errors.clone()))
    }

    /// Closes the client (see the core's `Client::close`): held locks are
    /// reported lost and released, later calls reject with the "closed"
    /// category. Resolves once the releases are answered.
    #[napi(catch_unwind)]
    pub fn close<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, ()>> {
        let closing = self.inner.close();
        runtime::promise(
            env,
            &self.errors,
            async move {
                closing.await;
                Ok(())
            },
            |()| (),
        )
    }
}

/// A JS number as a replica count: a whole number, its range checked by the
/// core.
fn replica_count(k: f64) -> rlock_core::Result<u32> {
    if k.fract() != 0.0 || !(0.0..=f64::from(u32::MAX)).contains(&k) {
        return Err(Error::InvalidArgument(format!(
            "syncReplicas must be a whole number of replicas (1 or more), got {k}"
        )));
    }
    let n = k as u32;
    validate::replicas(n).map_err(|_| {
        Error::InvalidArgument(format!("syncReplicas must be between 1 and 100, got {k}"))
    })?;
    Ok(n)
}
