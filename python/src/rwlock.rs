//! `RwLock`: a read-write lock's two sides, each a `Lock` of its own kind
//! made to one spec. The Python face passes the calling owner unit to either
//! side, so one thread's (or task's) read and write are one owner's, and the
//! core can tell a downgrade (write, then read) from an upgrade (refused).

use std::sync::Arc;

use pyo3::prelude::*;
use rlock_core::Kind;

use crate::connection::ClientState;
use crate::lock::{Lock, LockSpec};

#[pyclass(frozen, module = "rlock._native", name = "RwLock")]
pub struct RwLock {
    read: Py<Lock>,
    write: Py<Lock>,
}

impl RwLock {
    pub fn new(py: Python<'_>, client: Arc<ClientState>, spec: Arc<LockSpec>) -> PyResult<Self> {
        Ok(RwLock {
            read: Py::new(py, Lock::new(client.clone(), spec.clone(), Kind::Read))?,
            write: Py::new(py, Lock::new(client, spec, Kind::Write))?,
        })
    }
}

#[pymethods]
impl RwLock {
    /// The read side: shared with other readers.
    #[getter]
    fn read(&self, py: Python<'_>) -> Py<Lock> {
        self.read.clone_ref(py)
    }

    /// The write side: nobody else inside.
    #[getter]
    fn write(&self, py: Python<'_>) -> Py<Lock> {
        self.write.clone_ref(py)
    }
}
