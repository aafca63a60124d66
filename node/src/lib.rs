//! The Node binding of redis-rlock: the private native module behind the JS
//! face in `node/` (`node/index.js` and the modules it gathers). It converts
//! arguments, turns the core's futures into promises settled on the JS
//! thread, maps errors and wires cancellation; every decision about locking
//! is the core's (`rlock-core`).

// napi registers exports only outside cfg(test), so clippy's test build of
// this crate would see them as unused.
#![cfg_attr(test, allow(dead_code))]

mod cache;
mod client;
mod error;
mod job;
mod lock;
mod options;
mod runtime;
mod rwlock;
mod semaphore;
mod settings;
mod spelling;
