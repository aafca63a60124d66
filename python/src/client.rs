//! `Client`: the arguments checked up front, the connection made on first use
//! (and made afresh in a forked child, which must not touch the parent's).

use std::future::Future;
use std::sync::Arc;

use pyo3::prelude::*;
use rlock_core::{validate, Client as CoreClient, ClientOptions, Error, Kind, Stats};

use crate::cache::{Cache, CacheSpec};
use crate::connection::ClientState;
use crate::error::to_py;
use crate::job::{self, Job};
use crate::lock::{Lock, LockSpec};
use crate::numbers::{secs, Count, Seconds, Text};
use crate::runtime;
use crate::rwlock::RwLock;
use crate::semaphore::Semaphore;

#[pyclass(frozen, module = "rlock._native", name = "Client")]
pub struct Client {
    state: Arc<ClientState>,
}

impl Client {
    fn inspect_op(
        &self,
        name: &str,
    ) -> rlock_core::Result<impl Future<Output = rlock_core::Result<String>> + Send + 'static> {
        validate::name(name)?;
        let connected = self.state.connected();
        let name = name.to_owned();
        Ok(async move {
            let seen = connected.await?.inspect(&name).await?;
            Ok(seen.to_json().to_string())
        })
    }

    /// What the client counted: nothing yet if it has not connected.
    fn snapshot(&self) -> Stats {
        self.state.current().map(|c| c.stats()).unwrap_or_default()
    }

    fn invalidate_op(
        &self,
        key: &str,
    ) -> rlock_core::Result<impl Future<Output = rlock_core::Result<bool>> + Send + 'static> {
        validate::cache_key(key)?;
        let connected = self.state.connected();
        let key = key.to_owned();
        Ok(async move { connected.await?.invalidate(&key).await })
    }
}

fn spec_of(spec: &Bound<'_, LockSpec>) -> Arc<LockSpec> {
    Arc::new(spec.get().clone())
}

#[pymethods]
impl Client {
    /// Checks the arguments (no I/O); the connection is made on first use.
    /// `urls`: one URL, or several (Redlock masters, or Cluster seeds with
    /// `cluster`); `tls_ca`: the PEM of a private CA for `rediss://`.
    #[new]
    #[pyo3(signature = (urls=None, prefix=Text(rlock_core::DEFAULT_PREFIX.to_owned()), cluster=false, tls_ca=None))]
    fn new(
        py: Python<'_>,
        urls: Option<Vec<String>>,
        prefix: Text,
        cluster: bool,
        tls_ca: Option<Vec<u8>>,
    ) -> PyResult<Self> {
        let urls = urls.unwrap_or_else(|| vec![CoreClient::default_url()]);
        let prefix = prefix.0;
        let checked = || -> rlock_core::Result<String> {
            if urls.is_empty() {
                return Err(Error::invalid("at least one Redis URL is needed"));
            }
            validate::prefix(&prefix)?;
            let shown = urls
                .iter()
                .map(|u| validate::url(u))
                .collect::<rlock_core::Result<Vec<_>>>()?;
            Ok(shown.join(","))
        };
        let server = checked().map_err(|e| to_py(py, e))?;
        // A logging set up since the last client was made applies from here.
        crate::logging::read_levels(py)?;
        let (major, minor, patch) = {
            let v = py.version_info();
            (v.major, v.minor, v.patch)
        };
        let options = ClientOptions::default()
            .prefix(prefix)
            .cluster(cluster)
            .tls_ca_pem(tls_ca)
            .face(format!("python {major}.{minor}.{patch}"));
        Ok(Client {
            state: Arc::new(ClientState::new(urls, server, options)),
        })
    }

    /// A lock made to `spec` (checked when it was made).
    fn lock(&self, spec: &Bound<'_, LockSpec>) -> Lock {
        Lock::new(self.state.clone(), spec_of(spec), Kind::Mutex)
    }

    /// A read-write lock made to `spec`.
    fn rw_lock(&self, py: Python<'_>, spec: &Bound<'_, LockSpec>) -> PyResult<RwLock> {
        RwLock::new(py, self.state.clone(), spec_of(spec))
    }

    /// A semaphore of `permits` permits made to `spec` (`permits` checked here).
    fn semaphore(
        &self,
        py: Python<'_>,
        spec: &Bound<'_, LockSpec>,
        permits: Count,
    ) -> PyResult<Semaphore> {
        Semaphore::new(py, self.state.clone(), spec_of(spec), permits)
    }

    /// The cache entry `key` read to `spec` (`key` checked here).
    fn cache(&self, py: Python<'_>, key: &str, spec: &Bound<'_, CacheSpec>) -> PyResult<Cache> {
        Cache::new(py, self.state.clone(), key, spec.get())
    }

    /// Deletes the cache entry `key` (checked before any I/O), so the next
    /// read rebuilds it; whether there was one.
    fn invalidate(&self, py: Python<'_>, key: &str) -> PyResult<bool> {
        let invalidated = self.invalidate_op(key).map_err(|e| to_py(py, e))?;
        runtime::wait(py, invalidated)
    }

    fn invalidate_async<'py>(&self, py: Python<'py>, key: &str) -> PyResult<Bound<'py, PyAny>> {
        let invalidated = self.invalidate_op(key).map_err(|e| to_py(py, e))?;
        runtime::awaitable_task(py, invalidated)
    }

    /// Takes the run-once job `name` if no process holds it (one attempt;
    /// the bounds in seconds, checked before any I/O): the job, or None
    /// when it ran elsewhere this period.
    #[pyo3(signature = (name, at_least=None, at_most=None))]
    fn start_job(
        &self,
        py: Python<'_>,
        name: Text,
        at_least: Option<Seconds>,
        at_most: Option<Seconds>,
    ) -> PyResult<Option<Job>> {
        let taken = job::start(&self.state, &name.0, secs(at_least), secs(at_most))
            .map_err(|e| to_py(py, e))?;
        runtime::wait(py, taken)
    }

    #[pyo3(signature = (name, at_least=None, at_most=None))]
    fn start_job_async<'py>(
        &self,
        py: Python<'py>,
        name: Text,
        at_least: Option<Seconds>,
        at_most: Option<Seconds>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let taken = job::start(&self.state, &name.0, secs(at_least), secs(at_most))
            .map_err(|e| to_py(py, e))?;
        runtime::awaitable_task(py, taken)
    }

    /// Who holds the mutex `name` and who waits for it, as JSON (see the
    /// core's `Inspection::to_json`).
    fn inspect(&self, py: Python<'_>, name: &str) -> PyResult<String> {
        let seen = self.inspect_op(name).map_err(|e| to_py(py, e))?;
        runtime::wait(py, seen)
    }

    fn inspect_async<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
        let seen = self.inspect_op(name).map_err(|e| to_py(py, e))?;
        runtime::awaitable_task(py, seen)
    }

    /// The client's counters as JSON (see the core's `Stats::to_json`).
    fn stats(&self) -> String {
        self.snapshot().to_json().to_string()
    }

    /// The client's counters as Prometheus text.
    fn prometheus(&self) -> String {
        self.snapshot().prometheus()
    }

    /// Closes the client (see the core's `Client::close`): held locks are
    /// reported lost and released, later calls raise `rlock.ClientClosed`.
    /// Returns once the releases are answered (GIL released meanwhile).
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let closing = self.state.close();
        runtime::wait(py, async move {
            closing.await;
            Ok(())
        })
    }

    /// `close()` for asyncio: the releases are awaited, not waited for.
    fn close_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let closing = self.state.close();
        runtime::awaitable(py, async move {
            closing.await;
            Ok(())
        })
    }

    #[getter]
    fn server(&self) -> &str {
        self.state.server()
    }

    #[getter]
    fn prefix(&self) -> &str {
        &self.state.options().prefix
    }

    #[getter]
    fn cluster(&self) -> bool {
        self.state.options().cluster
    }

    #[getter]
    fn closed(&self) -> bool {
        self.state.closed()
    }
}
