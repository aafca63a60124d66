//! `Cache`: one cache entry's read as the core decides it (a hit, a load for
//! this caller, or a value and a refresh in the background), and `Rebuild`:
//! the end of a load, storing the bytes the Python face encoded. The face
//! runs the loader and encodes values (python/rlock/__init__.py); who loads,
//! who waits and what gets written are the core's.

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};
use rlock_core::{
    validate, CacheArgs, CacheOptions, Entry, Error, Read, Rebuild as CoreRebuild, Stored, Unit,
};

use crate::connection::ClientState;
use crate::error::to_py;
use crate::numbers::{secs, Seconds};
use crate::runtime;

/// A cache entry's options, checked once when they are given (before any
/// I/O). The signature of `CacheSpec()` is the one place the Python face
/// declares them; the core holds their defaults and rules.
#[pyclass(frozen, module = "rlock._native", name = "CacheSpec")]
pub struct CacheSpec {
    options: CacheOptions,
}

#[pymethods]
impl CacheSpec {
    /// `jitter` and `early` are shares, not seconds, but are read as
    /// `Seconds` are: an int too large for a float is out of range
    /// (ValueError), never an OverflowError.
    #[new]
    #[pyo3(signature = (*, ttl=None, stale=None, none_ttl=None, jitter=None, early=None, timeout=None, on_error=None, lock_ttl=None))]
    #[allow(clippy::too_many_arguments)] // Python's keyword arguments, one each
    fn new(
        py: Python<'_>,
        ttl: Option<Seconds>,
        stale: Option<Seconds>,
        none_ttl: Option<Seconds>,
        jitter: Option<Seconds>,
        early: Option<Seconds>,
        timeout: Option<Seconds>,
        on_error: Option<String>,
        lock_ttl: Option<Seconds>,
    ) -> PyResult<Self> {
        let args = CacheArgs {
            unit: Unit::Seconds,
            ttl: secs(ttl),
            stale: secs(stale),
            none_ttl: secs(none_ttl),
            jitter: secs(jitter),
            early: secs(early),
            timeout: secs(timeout),
            on_error,
            lock_ttl: secs(lock_ttl),
        };
        let options = args.check().map_err(|e| to_py(py, e))?;
        Ok(CacheSpec { options })
    }
}

#[pyclass(frozen, module = "rlock._native", name = "Cache")]
pub struct Cache {
    client: Arc<ClientState>,
    key: Arc<str>,
    options: CacheOptions,
}

impl Cache {
    /// Checks `key` (before any I/O).
    pub fn new(
        py: Python<'_>,
        client: Arc<ClientState>,
        key: &str,
        spec: &CacheSpec,
    ) -> PyResult<Self> {
        validate::cache_key(key).map_err(|e| to_py(py, e))?;
        Ok(Cache {
            client,
            key: Arc::from(key),
            options: spec.options.clone(),
        })
    }

    fn read_op(&self) -> impl Future<Output = rlock_core::Result<Outcome>> + Send + 'static {
        let connected = self.client.connected();
        let (key, options) = (self.key.clone(), self.options.clone());
        async move {
            let cache = connected.await?.cache(&key, options)?;
            Ok(Outcome(cache.read().await?))
        }
    }
}

#[pymethods]
impl Cache {
    #[getter]
    fn key(&self) -> &str {
        &self.key
    }

    /// `(kind, value, format, fence, rebuild)`: kind `"hit"` (no rebuild),
    /// `"load"` (no value: run the loader, then store or fail the rebuild)
    /// or `"refresh"` (the value to use now, and the rebuild to finish in
    /// the background). May wait for another caller's rebuild: interrupted
    /// by Ctrl-C, which leaves nothing held.
    fn read<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        runtime::wait_interruptible(py, self.read_op())?.into_pyobject(py)
    }

    /// `read()` for asyncio: cancelling the awaiting task stops the wait,
    /// and a rebuild handed over just then is given back when dropped.
    fn read_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        runtime::awaitable(py, self.read_op())
    }
}

/// A read on its way to Python.
pub struct Outcome(Read);

impl<'py> IntoPyObject<'py> for Outcome {
    type Target = PyTuple;
    type Output = Bound<'py, PyTuple>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let (kind, entry, rebuild) = match self.0 {
            Read::Hit(entry) => ("hit", Some(entry), None),
            Read::Refresh(entry, rebuild) => ("refresh", Some(entry), Some(rebuild)),
            Read::Load(rebuild) => ("load", None, Some(rebuild)),
        };
        let (value, format, fence) = match entry {
            Some(Entry {
                value,
                format,
                fence,
            }) => (value.map(|v| PyBytes::new(py, &v)), format, fence),
            None => (None, String::new(), 0),
        };
        (kind, value, format, fence, rebuild.map(Rebuild::new)).into_pyobject(py)
    }
}

/// A rebuild this caller holds: it ends once, by `store()`, `fail()` or
/// `abandon()`; dropped unfinished, the core gives its lock back in the
/// background and the waiters try again.
#[pyclass(frozen, module = "rlock._native", name = "Rebuild")]
pub struct Rebuild {
    fence: u64,
    /// With the process generation it was made in (see `runtime::generation`).
    pending: Mutex<Option<(u64, CoreRebuild)>>,
}

impl Rebuild {
    fn new(rebuild: CoreRebuild) -> Self {
        Rebuild {
            fence: rebuild.fence(),
            pending: Mutex::new(Some((runtime::generation(), rebuild))),
        }
    }

    fn take(&self) -> Option<(u64, CoreRebuild)> {
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    /// The core rebuild, to end it now.
    fn finish(&self) -> rlock_core::Result<CoreRebuild> {
        match self.take() {
            Some((generation, rebuild)) if generation == runtime::generation() => Ok(rebuild),
            Some((_, parents)) => {
                forget(parents);
                Err(Error::invalid(
                    "this rebuild was started before fork(): only that process can finish it",
                ))
            }
            None => Err(Error::invalid(
                "this rebuild has ended already (stored, failed or abandoned)",
            )),
        }
    }
}

/// A rebuild of the parent process: its client's sockets and runtime are
/// the parent's, so it is neither used nor dropped here.
fn forget(rebuild: CoreRebuild) {
    std::mem::forget(rebuild);
}

fn stored_name(stored: Stored) -> &'static str {
    match stored {
        Stored::Written => "written",
        Stored::LockLost => "lock_lost",
        Stored::Invalidated => "invalidated",
        Stored::Newer => "newer",
        Stored::Unknown => "unknown",
    }
}

#[pymethods]
impl Rebuild {
    /// The fencing token the value is written with.
    #[getter]
    fn fence(&self) -> u64 {
        self.fence
    }

    /// Stores `value` (None: the loader found nothing) tagged `format`, and
    /// gives the lock back; the outcome's name: `"written"`; not written,
    /// `"lock_lost"`, `"invalidated"` or `"newer"`; or `"unknown"` (Redis did
    /// not answer). Runs to the end (a Ctrl-C meanwhile is raised after it).
    fn store(&self, py: Python<'_>, value: Option<&[u8]>, format: &str) -> PyResult<&'static str> {
        let rebuild = self.finish().map_err(|e| to_py(py, e))?;
        runtime::wait(py, async move {
            rebuild.store(value, format).await.map(stored_name)
        })
    }

    /// The loader failed with `message`: gives the lock back, and the
    /// callers that waited for this rebuild get `CacheLoaderError` (or try
    /// again, as their `on_error` says).
    fn fail(&self, py: Python<'_>, message: &str) -> PyResult<()> {
        let rebuild = self.finish().map_err(|e| to_py(py, e))?;
        runtime::wait(py, rebuild.fail(message))
    }

    /// Ends the rebuild with nothing to report (the loader was interrupted):
    /// the lock is given back in the background and the waiters try again.
    /// Does nothing once the rebuild has ended.
    fn abandon(&self) {
        match self.take() {
            Some((generation, rebuild)) if generation == runtime::generation() => drop(rebuild),
            Some((_, parents)) => forget(parents),
            None => {}
        }
    }

    /// `store()` for asyncio, run as its own task: cancelling the awaiting
    /// task never cuts the write in half.
    fn store_async<'py>(
        &self,
        py: Python<'py>,
        value: Option<&[u8]>,
        format: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        let rebuild = self.finish().map_err(|e| to_py(py, e))?;
        let value = value.map(<[u8]>::to_vec);
        runtime::awaitable_task(py, async move {
            rebuild
                .store(value.as_deref(), &format)
                .await
                .map(stored_name)
        })
    }

    /// `fail()` for asyncio, run as its own task.
    fn fail_async<'py>(&self, py: Python<'py>, message: String) -> PyResult<Bound<'py, PyAny>> {
        let rebuild = self.finish().map_err(|e| to_py(py, e))?;
        runtime::awaitable_task(py, async move { rebuild.fail(&message).await })
    }
}

impl Drop for Rebuild {
    fn drop(&mut self) {
        // Unfinished: the core's own drop gives the lock back.
        if let Some((generation, rebuild)) = self.take() {
            if generation != runtime::generation() {
                forget(rebuild);
            }
        }
    }
}
