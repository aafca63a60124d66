//! `Client` in the JS face: connecting, making locks (mutexes, read-write
//! locks, semaphores), reading cache entries, closing.

use std::sync::Arc;

use napi::bindgen_prelude::{Buffer, FnArgs, Function, JsObjectValue, Object, PromiseRaw, Unknown};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::{Env, Status};
use napi_derive::napi;
use rlock_core::{validate, Client, ClientOptions, OptionName, Wait};
use tokio::sync::broadcast::error::RecvError;

use crate::cache::{self, CacheRead};
use crate::error::{ErrorFactory, Errors, Failure};
use crate::job::NativeJob;
use crate::lock::NativeLock;
use crate::options::{permit_count, CacheOptions, JobOptions, LockOptions};
use crate::runtime;
use crate::rwlock::NativeRwLock;
use crate::semaphore::NativeSemaphore;
use crate::spelling::option_name;

/// A connection to one Redis deployment, shared by the locks made from it.
#[napi]
pub struct NativeClient {
    inner: Client,
    errors: Arc<Errors>,
}

/// `(kind, details as JSON)` of a client event (see the core's `Event`).
type EventNotice = FnArgs<(&'static str, String)>;

/// Told of the client's events. Weak (unref'd): it never keeps Node alive.
type EventCallback = ThreadsafeFunction<EventNotice, (), EventNotice, Status, false, true>;

/// Connects to `urls` (`REDIS_URL` or the default when absent): one URL,
/// several masters (Redlock), or with `cluster` the seeds of a Cluster.
/// `tls_ca` is the PEM of a private CA for `rediss://`. `make_error` is the
/// face's error factory; every error of this client is built by it. `face`
/// names the runtime in the client's registration (`node 20.1.0`).
#[napi(catch_unwind)]
pub fn connect<'env>(
    env: &'env Env,
    urls: Option<Vec<String>>,
    prefix: Option<String>,
    cluster: bool,
    tls_ca: Option<Buffer>,
    make_error: ErrorFactory,
    face: String,
) -> napi::Result<PromiseRaw<'env, NativeClient>> {
    let errors = Errors::new(make_error);
    let urls = urls.unwrap_or_else(|| vec![Client::default_url()]);
    let mut options = ClientOptions::default()
        .cluster(cluster)
        .tls_ca_pem(tls_ca.map(|pem| pem.to_vec()))
        .face(face);
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
        self.made(env, options, |options, wait| {
            let lock = self.inner.lock_as(&name, options, &owner)?;
            Ok(NativeLock::new(lock, wait, self.errors.clone()))
        })
    }

    /// A read-write lock owned by `owner`, checked as `lock()` is.
    #[napi(catch_unwind)]
    pub fn rw_lock(
        &self,
        env: &Env,
        name: String,
        options: LockOptions,
        owner: String,
    ) -> napi::Result<NativeRwLock> {
        self.made(env, options, |options, wait| {
            let rw = self.inner.rw_lock(&name, options)?.with_owner(&owner);
            Ok(NativeRwLock::new(rw, wait, &self.errors))
        })
    }

    /// A semaphore of `permits` permits owned by `owner`, checked as
    /// `lock()` is.
    #[napi(catch_unwind)]
    pub fn semaphore(
        &self,
        env: &Env,
        name: String,
        permits: f64,
        options: LockOptions,
        owner: String,
    ) -> napi::Result<NativeSemaphore> {
        self.made(env, options, |options, wait| {
            let permits = permit_count(OptionName::Permits, permits)?;
            let semaphore = self.inner.semaphore(&name, permits, options)?;
            let semaphore = semaphore.with_owner(&owner);
            Ok(NativeSemaphore::new(semaphore, wait, self.errors.clone()))
        })
    }

    /// One read of the cache entry `key` (see `cache::read`). The key and
    /// every option are checked here, before any I/O.
    #[napi(catch_unwind)]
    pub fn cache_read<'env>(
        &self,
        env: &'env Env,
        key: String,
        options: CacheOptions,
    ) -> napi::Result<PromiseRaw<'env, CacheRead>> {
        let cache = || Ok::<_, Failure>(self.inner.cache(&key, options.args()?.check()?)?);
        let cache = cache().map_err(|f| self.errors.to_js(env, f))?;
        cache::read(env, &self.errors, cache)
    }

    /// Takes the run-once job `name` if no process holds it (one attempt,
    /// never a wait): the job, or null when it ran elsewhere this period.
    /// The name and the bounds are checked here, before any I/O.
    #[napi(catch_unwind, ts_return_type = "Promise<NativeJob | null>")]
    pub fn start_job<'env>(
        &self,
        env: &'env Env,
        name: String,
        options: JobOptions,
    ) -> napi::Result<PromiseRaw<'env, Option<NativeJob>>> {
        let checked = || {
            validate::name(&name)?;
            Ok::<_, Failure>(options.args()?.check()?)
        };
        let options = checked().map_err(|f| self.errors.to_js(env, f))?;
        let client = self.inner.clone();
        let errors = self.errors.clone();
        let taken = async move { Ok(client.start_job(&name, options).await?) };
        runtime::promise(env, &self.errors, taken, move |job| {
            job.map(|job| NativeJob::new(job, errors))
        })
    }

    /// Deletes the cache entry `key`: true when there was one.
    #[napi(catch_unwind)]
    pub fn invalidate<'env>(
        &self,
        env: &'env Env,
        key: String,
    ) -> napi::Result<PromiseRaw<'env, bool>> {
        let client = self.inner.clone();
        let invalidate = async move { Ok(client.invalidate(&key).await?) };
        runtime::promise(env, &self.errors, invalidate, |existed| existed)
    }

    /// Who holds the mutex `name` and who waits for it, as JSON (see the
    /// core's `Inspection::to_json`).
    #[napi(catch_unwind)]
    pub fn inspect<'env>(
        &self,
        env: &'env Env,
        name: String,
    ) -> napi::Result<PromiseRaw<'env, String>> {
        let client = self.inner.clone();
        let seen = async move { Ok(client.inspect(&name).await?.to_json().to_string()) };
        runtime::promise(env, &self.errors, seen, |json| json)
    }

    /// The client's counters as JSON (see the core's `Stats::to_json`).
    #[napi(catch_unwind)]
    pub fn stats(&self) -> String {
        self.inner.stats().to_json().to_string()
    }

    /// The client's counters as Prometheus text.
    #[napi(catch_unwind)]
    pub fn prometheus(&self) -> String {
        self.inner.stats().prometheus()
    }

    /// From now on, tells `callback(kind, json)` of each of the client's
    /// events, until the client is dropped.
    #[napi(catch_unwind)]
    pub fn watch_events(&self, callback: Function<EventNotice, ()>) -> napi::Result<()> {
        let callback: EventCallback = callback
            .build_threadsafe_function()
            .callee_handled::<false>()
            .weak::<true>()
            .build()?;
        let mut events = self.inner.events();
        let driver = runtime::get()?;
        driver.spawn(async move {
            loop {
                match events.recv().await {
                    Ok(event) => {
                        let details = event.to_json().to_string();
                        callback.call(
                            (event.kind(), details).into(),
                            ThreadsafeFunctionCallMode::NonBlocking,
                        );
                    }
                    // A listener this far behind lost the oldest: go on.
                    Err(RecvError::Lagged(_)) => continue,
                    Err(RecvError::Closed) => return,
                }
            }
        });
        Ok(())
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

impl NativeClient {
    /// What `make` makes of `options` once each is checked, thrown as the
    /// face's error when one is bad; then the warning about a lease that
    /// looks like a unit mistake, if it is one.
    fn made<T>(
        &self,
        env: &Env,
        options: LockOptions,
        make: impl FnOnce(rlock_core::LockOptions, Wait) -> Result<T, Failure>,
    ) -> napi::Result<T> {
        let checked = || -> Result<(T, Option<String>), Failure> {
            let args = options.args()?;
            let (options, wait) = args.check()?;
            Ok((make(options, wait)?, args.long_ttl_warning(&option_name)))
        };
        let (made, warning) = checked().map_err(|f| self.errors.to_js(env, f))?;
        if let Some(message) = warning {
            emit_warning(env, message, "RLOCK_LONG_TTL")?;
        }
        Ok(made)
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
