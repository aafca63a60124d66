//! Numbers as Python gives them: a number of seconds (a float or an int) and
//! a count (an int). An int too large for the Rust type is still a number,
//! just an absurd one: it becomes the extreme of its sign, which the core
//! refuses as out of range (ValueError), never an OverflowError.

use pyo3::exceptions::PyOverflowError;
use pyo3::prelude::*;

/// Seconds: ±infinity when too large.
#[derive(Clone, Copy)]
pub struct Seconds(pub f64);

/// A count (of permits): `i64::MIN` or `i64::MAX` when too large.
#[derive(Clone, Copy)]
pub struct Count(pub i64);

pub fn secs(s: Option<Seconds>) -> Option<f64> {
    s.map(|s| s.0)
}

/// `obj` as a `T`, or `below` / `above` for an int too large for one.
fn clamped<'py, T>(obj: Borrowed<'_, 'py, PyAny>, below: T, above: T) -> PyResult<T>
where
    T: for<'a> FromPyObject<'a, 'py, Error = PyErr>,
{
    match obj.extract::<T>() {
        Ok(v) => Ok(v),
        Err(e) if e.is_instance_of::<PyOverflowError>(obj.py()) => {
            Ok(if obj.lt(0)? { below } else { above })
        }
        Err(e) => Err(e),
    }
}

impl<'a, 'py> FromPyObject<'a, 'py> for Seconds {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        clamped(obj, f64::NEG_INFINITY, f64::INFINITY).map(Seconds)
    }
}

impl<'a, 'py> FromPyObject<'a, 'py> for Count {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        clamped(obj, i64::MIN, i64::MAX).map(Count)
    }
}
