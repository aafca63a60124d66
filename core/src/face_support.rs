//! What only the faces need: a runtime that a calling thread drives itself
//! (`driver`), and staying awake for a nearby Redis' replies (`spin`). Public
//! for the Python and Node bindings and the benchmarks; the core itself only
//! counts its requests in flight with `spin::awaited`.

pub mod driver;
pub mod spin;
