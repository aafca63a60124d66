//! The C ABI over the core, for the Go face (and any face to come that links
//! a C library): requests go in, completions come out. Every option, check,
//! wait, line, renewal, retry and error is the core's; this crate only moves
//! requests and results across the boundary.
//!
//! - A request is started by a call that never blocks: it spawns the work on
//!   the core's runtime and returns. Its outcome reaches the completion
//!   function given to [`rlock_init`](completion::rlock_init), called once per
//!   request with the caller's token, from a runtime thread (or, for the
//!   calls that make a handle, before the call returns).
//! - Handles (a client, a lock) are numbers the caller frees with their
//!   `_free` call: one used after that is refused, never misread memory. No
//!   pointer of the caller's is kept past a call.
//! - No panic crosses the boundary: one is a completion with
//!   [`RLOCK_INTERNAL`](failure::RLOCK_INTERNAL).
//!
//! `include/rlock.h` is generated from this crate by cbindgen (the test
//! `tests/header.rs` fails when it is out of date).

// The core's futures nest deep (a cache invalidation's, inside a request's
// catch_unwind and select): computing their layout exceeds rustc's default
// query depth on a clean build.
#![recursion_limit = "256"]

pub mod cache;
pub mod client;
pub mod completion;
pub mod failure;
mod handles;
pub mod inspect;
pub mod lock;
pub mod requests;
mod runtime;
pub mod text;
