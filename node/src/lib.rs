//! The Node binding of redis-rlock: the private native module behind the JS
//! face in `node/index.js`. It converts arguments, maps errors and wires
//! cancellation; every decision about locking is the core's (`rlock-core`).

// napi registers exports only outside cfg(test), so clippy's test build of
// this crate would see them as unused.
#![cfg_attr(test, allow(dead_code))]

mod client;
mod error;
mod lock;

/// The runtime every operation runs on: one worker thread, which does the I/O
/// of all operations and hands each result to the JS thread. A second worker
/// would only add hand-overs between the two on every operation.
#[napi_derive::module_init]
fn init() {
    if let Ok(rt) = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("rlock-runtime")
        .enable_all()
        .build()
    {
        napi::bindgen_prelude::create_custom_tokio_runtime(rt);
    }
}
