//! The SHA the core sends each of its scripts by, for the network-fault
//! suite, which picks the requests of one script on the wire: it reads the
//! core's own assembly rather than assembling the scripts again.

use pyo3::prelude::*;

/// The SHA-1 of the core's script `name` ("many acquire", "mutex
/// dequeue", …), or None when the core sends no script of that name.
#[pyfunction]
#[pyo3(name = "_script_sha")]
pub fn script_sha(name: &str) -> Option<&'static str> {
    rlock_core::script::sha(name)
}
