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

mod cache;
mod client;
mod context;
mod error;
mod face_support;
mod holdings;
mod inspect;
mod job;
mod keys;
mod kind;
mod lock;
mod options;
mod owner_mutexes;
mod redis;
mod registration;
mod rwlock;
mod semaphore;
mod shutdown;
mod telemetry;
mod url;
mod wakeups;
mod watchdog;

pub use crate::redis::scripts::{Holder, LockState, ManyHolderState, LINE_SHOWN};
pub use cache::{
    Cache, CacheArgs, CacheOptions, Entry, OnError, Read, Rebuild, Stored, BYTES, DEFAULT_EARLY,
    DEFAULT_JITTER, DEFAULT_NONE_TTL, MAX_VALUE_BYTES,
};
pub use client::{ClientOptions, Closing, DEFAULT_PREFIX, DEFAULT_URL};
pub use context::Client;
pub use error::{Error, Invalid, LostReason, NotOwnedReason, OptionName, Result};
pub use face_support::{driver, spin};
pub use inspect::{
    ClientInfo, Inspection, Listed, Listing, ManyHolderInspection, Owner, SCAN_COUNT,
};
pub use job::{Job, JobArgs, JobOptions, DEFAULT_AT_MOST};
pub use keys::{CacheKeys, Family, Keys};
pub use kind::{Kind, MAX_PERMITS};
pub use lock::{Acquired, Lock};
pub use options::{
    closest_option, LockArgs, LockOptions, Unit, Wait, DEFAULT_TTL, LONG_TTL, MIN_LEASE,
    QUEUE_AFTER,
};
pub use registration::REGISTRATION_LEASE;
pub use rwlock::RwLock;
pub use semaphore::Semaphore;
#[doc(hidden)]
pub use telemetry::metrics::counting_cost;
pub use telemetry::metrics::{Stats, Timings, BUCKETS};
pub use telemetry::Event;
pub use url::{sentinel_url_from_settings, url_from_settings, ServerSettings};

/// The scripts the core sends, by name, as it sends them: for tests that
/// fault the requests of one script by the SHA they carry.
#[doc(hidden)]
pub mod script {
    pub use crate::redis::scripts::{sha, source};
}

/// Every argument check of the faces, run before any I/O, beyond a lock's
/// options (see [`LockArgs::check`]): the name, a lease given to `extend`,
/// the prefix and the server URL.
pub mod validate {
    pub use crate::cache::cache_servers;
    pub use crate::kind::whole_permits;
    pub use crate::options::{cache_key, lease, name, prefix, span, MAX_DURATION, MAX_NAME_BYTES};
    pub use crate::url::checked as url;
}

// A Rust sample of core/rust.md that stops compiling fails `cargo test --doc`,
// as a stale sample would mislead its reader. (The README's are compiled by
// rlock-test-support: this crate includes no file from outside it, so that
// its package builds as it does here.)
#[cfg(doctest)]
#[doc = include_str!("../rust.md")]
pub struct RustDocs;
