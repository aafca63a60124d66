//! `Client` in the JS face: connecting, making locks, closing.

use std::sync::Arc;

use napi::bindgen_prelude::{Buffer, FnArgs, Function, JsObjectValue, Object, PromiseRaw, Unknown};
use napi::Env;
use napi_derive::napi;
use rlock_core::{Client, ClientOptions};

use crate::error::{ErrorFactory, Errors, Failure};
use crate::lock::NativeLock;
use crate::options::{option_name, LockOptions};
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
    /// A lock owned by `owner`, a unit the JS face chooses (a handle of its
    /// own, or the `using()` scope of the calling flow that holds `name`).
    /// Every option is checked here, before any I/O, so bad options throw at
    /// `client.lock()`; a lease that looks like a unit mistake warns once.
    #[napi(catch_unwind)]
    pub fn lock(
        &self,
        env: &Env,
        name: String,
        options: LockOptions,
        owner: String,
    ) -> napi::Result<NativeLock> {
        let made = || -> Result<(NativeLock, Option<String>), Failure> {
            let args = options.args()?;
            let (options, wait) = args.check()?;
            let lock = self.inner.lock_as(&name, options, &owner)?;
            let warning = args.long_ttl_warning(&option_name);
            Ok((NativeLock::new(lock, wait, self.errors.clone()), warning))
        };
        let (lock, warning) = made().map_err(|f| self.errors.to_js(env, f))?;
        if let Some(message) = warning {
            emit_warning(env, message, "RLOCK_LONG_TTL")?;
        }
        Ok(lock)
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

/// `process.emitWarning(message, { code })`: Node's own channel for
/// warnings, which the application can listen to or silence.
fn emit_warning(env: &Env, message: String, code: &str) -> napi::Result<()> {
    let process: Object = env.get_global()?.get_named_property("process")?;
    let emit: Function<FnArgs<(String, Object)>, Unknown> =
        process.get_named_property("emitWarning")?;
    let mut options = Object::new(env)?;
    options.set("code", code)?;
    emit.apply(process, (message, options).into())?;
    Ok(())
}
