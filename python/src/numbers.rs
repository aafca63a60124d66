//! Arguments as Python gives them: a number (of seconds, or a share), a
//! count (an int) and a text (a str). An int too large for
//! the Rust type is still a number, just an absurd one: it becomes the
//! extreme of its sign, which the core refuses as out of range (ValueError),
//! never an OverflowError. A bool is no number here, though Python's `bool`
//! is an `int`: `ttl=True` is a mistake, not one second.
//!
//! A wrong type is a TypeError saying what was expected and what came
//! ("must be an int, got float"); PyO3 names the argument in a note, which
//! the Python face puts in front of the message (`_named` in
//! `rlock/__init__.py`): "permits must be an int, got float".

use pyo3::exceptions::{PyOverflowError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyString};

/// Seconds (or another number): ±infinity when too large.
#[derive(Clone, Copy)]
pub struct Seconds(pub f64);

/// A count (of permits, of replicas): `i64::MIN` or `i64::MAX` when too large.
#[derive(Clone, Copy)]
pub struct Count(pub i64);

/// A text: a `str`.
#[derive(Clone)]
pub struct Text(pub String);

pub fn secs(s: Option<Seconds>) -> Option<f64> {
    s.map(|s| s.0)
}

/// The TypeError of an argument that is not what it must be: `what`
/// ("a number"), and the type that came (None as `None`; never the value).
fn wrong(obj: Borrowed<'_, '_, PyAny>, what: &str) -> PyErr {
    let got = if obj.is_none() {
        "None".to_owned()
    } else {
        obj.get_type()
            .name()
            .map_or_else(|_| "another type".to_owned(), |n| n.to_string())
    };
    PyTypeError::new_err(format!("must be {what}, got {got}"))
}

/// `obj` as a `T` (`what` it must be), or `below` / `above` for an int too
/// large for one. Anything Python itself takes as one (a NumPy number, a
/// Decimal) is one, but a bool.
fn clamped<'py, T>(obj: Borrowed<'_, 'py, PyAny>, what: &str, below: T, above: T) -> PyResult<T>
where
    T: for<'a> FromPyObject<'a, 'py, Error = PyErr>,
{
    if obj.is_instance_of::<PyBool>() {
        return Err(wrong(obj, what));
    }
    match obj.extract::<T>() {
        Ok(v) => Ok(v),
        Err(e) if e.is_instance_of::<PyOverflowError>(obj.py()) => {
            Ok(if obj.lt(0)? { below } else { above })
        }
        Err(e) if e.is_instance_of::<PyTypeError>(obj.py()) => Err(wrong(obj, what)),
        Err(e) => Err(e),
    }
}

impl<'a, 'py> FromPyObject<'a, 'py> for Seconds {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        clamped(obj, "a number", f64::NEG_INFINITY, f64::INFINITY).map(Seconds)
    }
}

impl<'a, 'py> FromPyObject<'a, 'py> for Count {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        clamped(obj, "an int", i64::MIN, i64::MAX).map(Count)
    }
}

impl<'a, 'py> FromPyObject<'a, 'py> for Text {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        if !obj.is_instance_of::<PyString>() {
            return Err(wrong(obj, "a str"));
        }
        // A lone surrogate is a str that is no text: UnicodeEncodeError.
        obj.extract::<String>().map(Text)
    }
}
