//! `Semaphore`: a counting semaphore's permits, as `Lock`s of one spec each
//! taking a number of them (one owner's holding is the same whichever number
//! its handle takes), and the counts of what is free and held.

use std::future::Future;
use std::sync::Arc;

use pyo3::prelude::*;
use rlock_core::Kind;

use crate::connection::ClientState;
use crate::error::to_py;
use crate::lock::{Lock, LockSpec};
use crate::numbers::Count;
use crate::runtime;

#[pyclass(frozen, module = "rlock._native", name = "Semaphore")]
pub struct Semaphore {
    client: Arc<ClientState>,
    spec: Arc<LockSpec>,
    size: u32,
}

impl Semaphore {
    /// Checks `permits` (before any I/O).
    pub fn new(
        py: Python<'_>,
        client: Arc<ClientState>,
        spec: Arc<LockSpec>,
        permits: Count,
    ) -> PyResult<Self> {
        let size = match Kind::permits(permits.0, 1).map_err(|e| to_py(py, e))? {
            Kind::Permits { size, .. } => size,
            _ => unreachable!("Kind::permits makes permits"),
        };
        Ok(Semaphore { client, spec, size })
    }

    /// The core semaphore, connecting first if needed.
    fn connected(
        &self,
    ) -> impl Future<Output = rlock_core::Result<rlock_core::Semaphore>> + Send + 'static {
        let connected = self.client.connected();
        let spec = self.spec.clone();
        let size = self.size.into();
        async move {
            connected
                .await?
                .semaphore(spec.name(), size, spec.options().clone())
        }
    }

    fn available_op(&self) -> impl Future<Output = rlock_core::Result<u32>> + Send + 'static {
        let semaphore = self.connected();
        async move { semaphore.await?.available().await }
    }

    fn held_op(&self) -> impl Future<Output = rlock_core::Result<u32>> + Send + 'static {
        let semaphore = self.connected();
        async move { semaphore.await?.held().await }
    }
}

#[pymethods]
impl Semaphore {
    #[getter]
    fn size(&self) -> u32 {
        self.size
    }

    /// The lock taking `take` permits (checked: 1 to the size, before any I/O).
    fn lock(&self, py: Python<'_>, take: Count) -> PyResult<Lock> {
        let kind = Kind::permits(self.size.into(), take.0).map_err(|e| to_py(py, e))?;
        Ok(Lock::new(self.client.clone(), self.spec.clone(), kind))
    }

    /// Permits free now.
    fn available(&self, py: Python<'_>) -> PyResult<u32> {
        runtime::wait(py, self.available_op())
    }

    /// Permits held now, by every holder.
    fn held(&self, py: Python<'_>) -> PyResult<u32> {
        runtime::wait(py, self.held_op())
    }

    fn available_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        runtime::awaitable_task(py, self.available_op())
    }

    fn held_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        runtime::awaitable_task(py, self.held_op())
    }
}
