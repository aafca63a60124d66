//! `rlock-core`: a Redis distributed lock, the one core behind the Python, Node
//! and command-line faces of redis-rlock.
//!
//! ```no_run
//! # async fn demo() -> rlock_core::Result<()> {
//! use rlock_core::{Client, Wait};
//! let client = Client::connect("redis://127.0.0.1:6379").await?;
//! let lock = client.lock("product:1001")?;
//! let held = lock.acquire(Wait::Forever).await?;
//! println!("fencing token {}", held.fencing_token);
//! lock.release().await?;
//! # Ok(()) }
//! ```

mod client;
mod deployment;
pub mod driver;
mod error;
mod feed;
mod keys;
mod lock;
mod node;
mod scripts;
pub mod spin;
mod tls;
mod turns;
pub mod validate;
mod wait;
mod watchdog;

pub use client::{Client, ClientOptions, Closing, DEFAULT_PREFIX, DEFAULT_URL};
pub use error::{Error, LostReason, NotOwnedReason, Result};
pub use keys::Keys;
pub use lock::{Acquired, Lock, LockOptions, Wait, DEFAULT_TTL, QUEUE_AFTER};
pub use scripts::LockState;
pub use validate::Unit;

// A Rust sample of the README or of docs/rust.md that stops compiling fails
// `cargo test --doc`, as a stale sample would mislead its reader.
#[cfg(doctest)]
#[doc = include_str!("../../docs/rust.md")]
pub struct RustDocs;

#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDocs;
