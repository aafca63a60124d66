//! Reusing an application's Redis settings (`Client.from_redis()`): the
//! Python face reads them off the application's redis-py client, and the core
//! turns them into the URLs this package connects to, so a password is
//! encoded and checked the one way every URL is.

use pyo3::prelude::*;

use crate::error::to_py;

/// One server's settings (or one Sentinel's), as found on a redis-py client.
#[pyclass(
    frozen,
    from_py_object,
    module = "rlock._native",
    name = "ServerSettings"
)]
#[derive(Clone)]
pub struct ServerSettings(rlock_core::ServerSettings);

#[pymethods]
impl ServerSettings {
    #[new]
    #[pyo3(signature = (*, host, port, db=0, username=None, password=None, tls=false))]
    fn new(
        host: String,
        port: u16,
        db: i64,
        username: Option<String>,
        password: Option<String>,
        tls: bool,
    ) -> Self {
        ServerSettings(rlock_core::ServerSettings {
            host,
            port,
            db,
            username,
            password,
            tls,
        })
    }
}

/// The `redis://` (or `rediss://`) URL of one server.
#[pyfunction]
pub fn url_from_settings(py: Python<'_>, settings: &ServerSettings) -> PyResult<String> {
    rlock_core::url_from_settings(&settings.0).map_err(|e| to_py(py, e))
}

/// The `redis+sentinel://` URL of the master named `master`, found through
/// `sentinels`; `db`, `username`, `password` and `tls` are the master's.
#[pyfunction]
#[pyo3(signature = (master, sentinels, db, username, password, tls))]
pub fn sentinel_url_from_settings(
    py: Python<'_>,
    master: &str,
    sentinels: Vec<ServerSettings>,
    db: i64,
    username: Option<&str>,
    password: Option<&str>,
    tls: bool,
) -> PyResult<String> {
    let sentinels: Vec<_> = sentinels.into_iter().map(|s| s.0).collect();
    rlock_core::sentinel_url_from_settings(master, &sentinels, db, username, password, tls)
        .map_err(|e| to_py(py, e))
}
