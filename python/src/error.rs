//! The core's error categories as the Python exceptions of docs/python.md's table.
//! The exception classes are defined in `rlock/__init__.py` (two of them have
//! two bases, which PyO3's `create_exception!` cannot express).

use std::any::Any;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use pyo3::IntoPyObjectExt;
use rlock_core::{Error, OptionName};

/// What a native call can fail with: a core error, or a panic caught before it
/// could reach Python as a `PanicException`.
pub enum Failure {
    Core(Error),
    Panic(String),
}

impl Failure {
    pub fn panic(payload: &(dyn Any + Send)) -> Self {
        let text = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".to_owned());
        Failure::Panic(text)
    }

    pub fn into_py(self, py: Python<'_>) -> PyErr {
        self.into_py_spelled(py, option_name)
    }

    /// The exception, a bad option named as `spell` names it.
    fn into_py_spelled(self, py: Python<'_>, spell: fn(OptionName) -> &'static str) -> PyErr {
        let e = match self {
            Failure::Panic(text) => {
                return raise(
                    py,
                    "LockError",
                    format!("internal error: {text}"),
                    None,
                    None,
                )
            }
            Failure::Core(e) => e,
        };
        let message = e.to_string();
        match e {
            Error::InvalidArgument(invalid) => PyValueError::new_err(invalid.spelled(spell)),
            Error::Timeout { name, .. } | Error::Busy { name } => {
                raise(py, "LockTimeout", message, Some(&name), None)
            }
            Error::NotOwned { name, reason } => raise(
                py,
                "LockNotOwned",
                message,
                Some(&name),
                Some(reason.as_str()),
            ),
            Error::Lost { name, reason } => {
                raise(py, "LockLost", message, Some(&name), Some(reason.as_str()))
            }
            Error::Connection(_) => raise(py, "ConnectionError", message, None, None),
            Error::Closed => raise(py, "ClientClosed", message, None, None),
            Error::Upgrade { name } => raise(py, "LockUpgradeError", message, Some(&name), None),
            Error::LoaderFailed {
                key,
                message: failure,
            } => raise(py, "CacheLoaderError", message, Some(&key), Some(&failure)),
        }
    }
}

/// A lock option as Python names it: a keyword argument of `LockSpec()`
/// (the core's own names), `Client.semaphore()` or a semaphore's `acquire()`.
pub fn option_name(option: OptionName) -> &'static str {
    match option {
        OptionName::Take => "n",
        _ => option.name(),
    }
}

/// A lock option as the lock factories (`Client.lock()` and the like) name
/// it: the wait is `blocking_timeout=` there, as in redis-py, whose
/// `timeout=` is the lease (`ttl=` here). `acquire()` keeps `timeout=`.
pub fn factory_option_name(option: OptionName) -> &'static str {
    match option {
        OptionName::Timeout => "blocking_timeout",
        _ => option_name(option),
    }
}

/// A core error as a Python exception.
pub fn to_py(py: Python<'_>, e: Error) -> PyErr {
    Failure::Core(e).into_py(py)
}

/// A core error as a Python exception, a bad option named as `spell` names it.
pub fn to_py_spelled(py: Python<'_>, e: Error, spell: fn(OptionName) -> &'static str) -> PyErr {
    Failure::Core(e).into_py_spelled(py, spell)
}

/// Builds `rlock.<class>(message, name=..., reason=...)`.
fn raise(
    py: Python<'_>,
    class: &str,
    message: String,
    name: Option<&str>,
    reason: Option<&str>,
) -> PyErr {
    let build = || -> PyResult<PyErr> {
        let class = py.import("rlock")?.getattr(class)?;
        let kwargs = PyDict::new(py);
        kwargs.set_item("name", name)?;
        kwargs.set_item("reason", reason)?;
        Ok(PyErr::from_value(class.call((message,), Some(&kwargs))?))
    };
    // If the exception cannot be built, that failure is the one to show.
    build().unwrap_or_else(|e| e)
}

/// The result of an awaited native call, turned into a Python value or
/// exception on the event loop's side, where the GIL is already held.
pub struct Reply<T>(pub Result<T, Failure>);

impl<'py, T: IntoPyObject<'py>> IntoPyObject<'py> for Reply<T> {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match self.0 {
            Ok(v) => v.into_bound_py_any(py),
            Err(f) => Err(f.into_py(py)),
        }
    }
}
