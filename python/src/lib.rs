//! `rlock._native`: the PyO3 module behind the `rlock` Python package. It
//! converts arguments, bridges the GIL and asyncio to the core's futures, and
//! maps errors; every locking decision is the core's (`rlock-core`). The
//! public face is `python/rlock/__init__.py`, which adds the owner unit (the
//! calling thread or asyncio task) to every call.

use pyo3::prelude::*;

mod cache;
mod client;
mod connection;
mod error;
mod job;
mod lock;
mod logging;
mod numbers;
mod runtime;
mod rwlock;
mod script;
mod semaphore;
mod settings;

#[pymodule]
#[pyo3(name = "_native")]
fn native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    runtime::install_fork_handler()?;
    logging::install(m.py())?;
    m.add_class::<client::Client>()?;
    m.add_class::<cache::Cache>()?;
    m.add_class::<cache::CacheSpec>()?;
    m.add_class::<cache::Rebuild>()?;
    m.add_class::<job::Job>()?;
    m.add_class::<lock::Lock>()?;
    m.add_class::<lock::LockSpec>()?;
    m.add_class::<lock::Acquisition>()?;
    m.add_class::<rwlock::RwLock>()?;
    m.add_class::<semaphore::Semaphore>()?;
    m.add_class::<settings::ServerSettings>()?;
    m.add_function(wrap_pyfunction!(lock::closest_option, m)?)?;
    m.add_function(wrap_pyfunction!(script::script_sha, m)?)?;
    m.add_function(wrap_pyfunction!(settings::url_from_settings, m)?)?;
    m.add_function(wrap_pyfunction!(settings::sentinel_url_from_settings, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    let before_exit = wrap_pyfunction!(before_exit, m)?;
    m.py()
        .import("atexit")?
        .call_method1("register", (before_exit,))?;
    Ok(())
}

/// Registered with `atexit`: what is still queued for the `rlock` logger is
/// handed over first (for up to a second), then the runtime stops handing
/// results to Python (see `runtime::stop_bridging`).
#[pyfunction]
fn before_exit(py: Python<'_>) {
    let logged_by = std::time::Instant::now() + std::time::Duration::from_secs(1);
    py.detach(|| logging::drain(logged_by));
    runtime::stop_bridging(py);
}
