//! `Lock`: one lock name as seen by whichever owner calls. The Python face
//! passes the owner unit (process id plus thread or asyncio task) with every
//! call; the core lock for that owner is made per call (`with_owner`), which
//! costs no I/O. The same class serves every kind of lock: the mutex, a side
//! of a read-write lock, and permits of a semaphore (see `rwlock.rs`,
//! `semaphore.rs`).

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};

use pyo3::prelude::*;
use rlock_core::{
    validate, Error, Kind, Lock as CoreLock, LockArgs, LockOptions, OptionName, Unit, Wait,
    DEFAULT_TTL,
};

use crate::connection::ClientState;
use crate::error::{factory_option_name, option_name, to_py, to_py_spelled};
use crate::numbers::{secs, Count, Seconds, Text};
use crate::runtime;

/// A lock's arguments, checked once when they are given (before any I/O).
/// The signature of `LockSpec()` is the one place the Python face declares
/// a lock's options and their defaults.
#[pyclass(frozen, module = "rlock._native", name = "LockSpec")]
#[derive(Debug, Clone)]
pub struct LockSpec {
    name: String,
    /// As given: `acquire()` may override the wait's part of them.
    args: LockArgs,
    options: LockOptions,
    wait: Wait,
}

#[pymethods]
impl LockSpec {
    #[new]
    #[pyo3(signature = (name, *, ttl=Seconds(30.0), timeout=None, blocking=true, auto_renew=true, max_hold=None, sync_replicas=None, fair=false, queue_after=None, allow_long_ttl=false))]
    #[allow(clippy::too_many_arguments)] // Python's keyword arguments, one each
    fn new(
        py: Python<'_>,
        name: Text,
        ttl: Seconds,
        timeout: Option<Seconds>,
        blocking: bool,
        auto_renew: bool,
        max_hold: Option<Seconds>,
        sync_replicas: Option<Count>,
        fair: bool,
        queue_after: Option<Seconds>,
        allow_long_ttl: bool,
    ) -> PyResult<Self> {
        let args = LockArgs {
            unit: Unit::Seconds,
            ttl: Some(ttl.0),
            timeout: secs(timeout),
            blocking,
            auto_renew,
            max_hold: secs(max_hold),
            // Beyond 2^53 the count is off by a little: refused all the same.
            sync_replicas: sync_replicas.map(|k| k.0 as f64),
            fair,
            queue_after: secs(queue_after),
            allow_long_ttl,
        };
        let name = name.0;
        let check = || -> rlock_core::Result<Self> {
            validate::name(&name)?;
            let (options, wait) = args.check()?;
            Ok(LockSpec {
                name,
                args,
                options,
                wait,
            })
        };
        // Made by the lock factories, whose wait is `blocking_timeout=`.
        check().map_err(|e| to_py_spelled(py, e, factory_option_name))
    }

    /// The warning to give about a lease over an hour that nothing says is
    /// meant: the first time in the process only (the core keeps count).
    fn long_ttl_warning(&self) -> Option<String> {
        self.args.long_ttl_warning(&option_name)
    }
}

/// The name in `known` nearest to the misspelt keyword `unknown` (the
/// core's choice), for the "did you mean" of an unexpected keyword.
#[pyfunction]
pub fn closest_option(unknown: &str, known: Vec<String>) -> Option<String> {
    let known: Vec<&str> = known.iter().map(String::as_str).collect();
    rlock_core::closest_option(unknown, &known).map(str::to_owned)
}

impl LockSpec {
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn options(&self) -> &LockOptions {
        &self.options
    }

    /// The wait of one `acquire()`: arguments left as None take the lock's own.
    fn wait(&self, blocking: Option<bool>, timeout: Option<f64>) -> rlock_core::Result<Wait> {
        if blocking.is_none() && timeout.is_none() {
            return Ok(self.wait);
        }
        LockArgs {
            blocking: blocking.unwrap_or(self.args.blocking),
            timeout: timeout.or(self.args.timeout),
            ..self.args
        }
        .wait()
    }
}

#[pyclass(frozen, module = "rlock._native", name = "Lock")]
pub struct Lock {
    client: Arc<ClientState>,
    spec: Arc<LockSpec>,
    kind: Kind,
    /// The core lock last made for this process's client: the core lock of
    /// another owner unit is a copy of it with that owner (its name checked
    /// and its keys built once).
    made: Arc<Mutex<Option<CoreLock>>>,
}

impl Lock {
    pub fn new(client: Arc<ClientState>, spec: Arc<LockSpec>, kind: Kind) -> Self {
        Lock {
            client,
            spec,
            kind,
            made: Arc::new(Mutex::new(None)),
        }
    }

    /// The core lock for `unit`, connecting first if needed.
    fn owned_by(
        &self,
        unit: &str,
    ) -> impl Future<Output = rlock_core::Result<CoreLock>> + Send + 'static {
        let connected = self.client.connected();
        let (spec, kind) = (self.spec.clone(), self.kind);
        let made = self.made.clone();
        let unit = unit.to_owned();
        async move { lock_for(&made, &spec, kind, &connected.await?, &unit) }
    }

    /// The core lock for `unit` if this process has connected (no I/O).
    fn held_by(&self, unit: &str) -> Option<CoreLock> {
        lock_for(
            &self.made,
            &self.spec,
            self.kind,
            &self.client.current()?,
            unit,
        )
        .ok()
    }

    /// Acquires, giving the lock and its fencing token; `Ok(None)` when the
    /// wait ended without the lock.
    fn acquire_op(
        &self,
        unit: &str,
        wait: Wait,
    ) -> impl Future<Output = rlock_core::Result<Option<(CoreLock, u64)>>> + Send + 'static {
        let lock = self.owned_by(unit);
        async move {
            let lock = lock.await?;
            match lock.acquire(wait).await {
                Ok(acquired) => Ok(Some((lock, acquired.fencing_token))),
                Err(Error::Timeout { .. } | Error::Busy { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        }
    }

    /// Acquires with the lock's own wait (`with`), giving the lock and its
    /// fencing token.
    fn enter_op(
        &self,
        unit: &str,
    ) -> impl Future<Output = rlock_core::Result<(CoreLock, u64)>> + Send + 'static {
        let lock = self.owned_by(unit);
        let wait = self.spec.wait;
        async move {
            let lock = lock.await?;
            let acquired = lock.acquire(wait).await?;
            Ok((lock, acquired.fencing_token))
        }
    }

    fn release_op(
        &self,
        unit: &str,
    ) -> impl Future<Output = rlock_core::Result<()>> + Send + 'static {
        let lock = self.owned_by(unit);
        async move { lock.await?.release().await.map(drop) }
    }

    fn finish_op(
        &self,
        unit: &str,
    ) -> impl Future<Output = rlock_core::Result<()>> + Send + 'static {
        let lock = self.owned_by(unit);
        async move { lock.await?.finish().await }
    }

    fn extend_op(
        &self,
        unit: &str,
        ttl: Option<f64>,
    ) -> rlock_core::Result<impl Future<Output = rlock_core::Result<()>> + Send + 'static> {
        let ttl = ttl
            .map(|t| validate::lease(OptionName::Ttl, t, Unit::Seconds))
            .transpose()?;
        let lock = self.owned_by(unit);
        Ok(async move { lock.await?.extend(ttl).await })
    }

    fn locked_op(&self) -> impl Future<Output = rlock_core::Result<bool>> + Send + 'static {
        let lock = self.owned_by("");
        async move { lock.await?.locked().await }
    }

    fn owned_op(
        &self,
        unit: &str,
    ) -> impl Future<Output = rlock_core::Result<bool>> + Send + 'static {
        let lock = self.owned_by(unit);
        async move { lock.await?.owned().await }
    }
}

/// The core lock of `spec` and `kind` for `unit` on `client`, from the one
/// made last when it was made on that client (a forked child's is another).
fn lock_for(
    made: &Mutex<Option<CoreLock>>,
    spec: &LockSpec,
    kind: Kind,
    client: &rlock_core::Client,
    unit: &str,
) -> rlock_core::Result<CoreLock> {
    let mut made = made.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(lock) = made.as_ref().filter(|l| l.client().id() == client.id()) {
        return Ok(lock.with_owner(unit));
    }
    let (name, options) = (spec.name.as_str(), spec.options.clone());
    let lock = match kind {
        Kind::Mutex => client.lock_as(name, options, unit)?,
        Kind::Read => client
            .rw_lock(name, options)?
            .with_owner(unit)
            .read()
            .clone(),
        Kind::Write => client
            .rw_lock(name, options)?
            .with_owner(unit)
            .write()
            .clone(),
        Kind::Rebuild => {
            return Err(rlock_core::Error::invalid(
                "a cache entry's rebuild lock is taken by cached(), not as a lock",
            ))
        }
        Kind::Permits { size, take } => client
            .semaphore(name, size.into(), options)?
            .with_owner(unit)
            .permits(take.into())?,
    };
    *made = Some(lock.clone());
    Ok(lock)
}

#[pymethods]
impl Lock {
    #[getter]
    fn name(&self) -> &str {
        &self.spec.name
    }

    #[getter]
    fn ttl(&self) -> f64 {
        // Always given: `LockSpec()` has a default for it.
        self.spec.args.ttl.unwrap_or(DEFAULT_TTL.as_secs_f64())
    }

    #[getter]
    fn timeout(&self) -> Option<f64> {
        self.spec.args.timeout
    }

    #[getter]
    fn blocking(&self) -> bool {
        self.spec.args.blocking
    }

    #[getter]
    fn auto_renew(&self) -> bool {
        self.spec.options.auto_renew
    }

    #[getter]
    fn max_hold(&self) -> Option<f64> {
        self.spec.options.max_hold.map(|d| d.as_secs_f64())
    }

    #[getter]
    fn sync_replicas(&self) -> Option<u32> {
        self.spec.options.sync_replicas
    }

    #[getter]
    fn fair(&self) -> bool {
        self.spec.options.fair
    }

    /// True when acquired, False when the wait ended without the lock.
    #[pyo3(signature = (unit, blocking=None, timeout=None))]
    fn acquire(
        &self,
        py: Python<'_>,
        unit: &str,
        blocking: Option<bool>,
        timeout: Option<Seconds>,
    ) -> PyResult<bool> {
        let wait = self
            .spec
            .wait(blocking, secs(timeout))
            .map_err(|e| to_py(py, e))?;
        let acquired = self.acquire_op(unit, wait);
        runtime::wait_interruptible(py, async move { Ok(acquired.await?.is_some()) })
    }

    /// Acquires with the lock's own wait, giving the fencing token; raises
    /// `LockTimeout` when the wait ends.
    fn enter(&self, py: Python<'_>, unit: &str) -> PyResult<u64> {
        let entered = self.enter_op(unit);
        runtime::wait_interruptible(py, async move { Ok(entered.await?.1) })
    }

    fn release(&self, py: Python<'_>, unit: &str) -> PyResult<()> {
        runtime::wait(py, self.release_op(unit))
    }

    /// Ends a `with` block: releases, and raises `LockLost` if the lease
    /// ended inside it.
    fn finish(&self, py: Python<'_>, unit: &str) -> PyResult<()> {
        runtime::wait(py, self.finish_op(unit))
    }

    #[pyo3(signature = (unit, ttl=None))]
    fn extend(&self, py: Python<'_>, unit: &str, ttl: Option<Seconds>) -> PyResult<()> {
        let extended = self.extend_op(unit, secs(ttl)).map_err(|e| to_py(py, e))?;
        runtime::wait(py, extended)
    }

    fn locked(&self, py: Python<'_>) -> PyResult<bool> {
        runtime::wait(py, self.locked_op())
    }

    fn owned(&self, py: Python<'_>, unit: &str) -> PyResult<bool> {
        runtime::wait(py, self.owned_op(unit))
    }

    /// The fencing token of `unit`'s holding, if it holds the lock.
    fn fencing_token(&self, unit: &str) -> Option<u64> {
        self.held_by(unit)?.fencing_token()
    }

    /// Whether `unit`'s holding was lost (its lease ended while held).
    fn lost(&self, unit: &str) -> bool {
        self.held_by(unit).is_some_and(|l| l.lost().is_some())
    }

    /// Awaitable of an `Acquisition` when acquired, None when the wait ended.
    #[pyo3(signature = (unit, blocking=None, timeout=None))]
    fn acquire_async<'py>(
        &self,
        py: Python<'py>,
        unit: &str,
        blocking: Option<bool>,
        timeout: Option<Seconds>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let wait = self
            .spec
            .wait(blocking, secs(timeout))
            .map_err(|e| to_py(py, e))?;
        let acquired = self.acquire_op(unit, wait);
        runtime::awaitable(py, async move { Ok(acquired.await?.map(Acquisition::new)) })
    }

    /// Awaitable of an `Acquisition`; raises `LockTimeout` when the wait ends.
    fn enter_async<'py>(&self, py: Python<'py>, unit: &str) -> PyResult<Bound<'py, PyAny>> {
        let entered = self.enter_op(unit);
        runtime::awaitable(py, async move { entered.await.map(Acquisition::new) })
    }

    fn release_async<'py>(&self, py: Python<'py>, unit: &str) -> PyResult<Bound<'py, PyAny>> {
        runtime::awaitable_task(py, self.release_op(unit))
    }

    fn finish_async<'py>(&self, py: Python<'py>, unit: &str) -> PyResult<Bound<'py, PyAny>> {
        runtime::awaitable_task(py, self.finish_op(unit))
    }

    #[pyo3(signature = (unit, ttl=None))]
    fn extend_async<'py>(
        &self,
        py: Python<'py>,
        unit: &str,
        ttl: Option<Seconds>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let extended = self.extend_op(unit, secs(ttl)).map_err(|e| to_py(py, e))?;
        runtime::awaitable_task(py, extended)
    }

    fn locked_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        runtime::awaitable_task(py, self.locked_op())
    }

    fn owned_async<'py>(&self, py: Python<'py>, unit: &str) -> PyResult<Bound<'py, PyAny>> {
        runtime::awaitable_task(py, self.owned_op(unit))
    }
}

/// One acquisition made by an awaited acquire, on its way to the awaiting
/// task. asyncio drops the result of a future whose task was cancelled just as
/// it completed; an acquisition dropped without `keep()` is released then, so
/// a cancelled task never leaves a lock behind.
#[pyclass(frozen, module = "rlock._native", name = "Acquisition")]
pub struct Acquisition {
    fencing_token: u64,
    pending: Mutex<Option<(u64, CoreLock)>>,
}

impl Acquisition {
    fn new((lock, fencing_token): (CoreLock, u64)) -> Self {
        Acquisition {
            fencing_token,
            pending: Mutex::new(Some((runtime::generation(), lock))),
        }
    }
}

#[pymethods]
impl Acquisition {
    /// The awaiting task received the acquisition: it is its own now. Gives
    /// its fencing token.
    fn keep(&self) -> u64 {
        let taken = self
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        drop(taken);
        self.fencing_token
    }
}

impl Drop for Acquisition {
    fn drop(&mut self) {
        let pending = self
            .pending
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let Some((generation, lock)) = pending else {
            return;
        };
        if generation != runtime::generation() {
            // Made in the parent process: not this process' to release.
            std::mem::forget(lock);
            return;
        }
        if let Ok(rt) = runtime::get() {
            rt.spawn(async move {
                let _ = lock.release().await;
            });
        }
    }
}
