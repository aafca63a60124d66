//! One rebuild of a cache entry: the caller holding the entry's rebuild
//! lock, which stores what its loader gave (fenced by the lock's token), or
//! tells the callers waiting for it that it stored nothing. Either way it
//! gives the lock back; dropped unfinished, it does so in the background.

use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use tokio::time::Instant;

use super::options::{self, CacheOptions};
use crate::error::Result;
use crate::keys::CacheKeys;
use crate::lock::Lock;
use crate::redis::cached::{EntryWrite, WriteReply};

/// How long a failure outlives the rebuild lock's lease: a caller waiting for
/// that rebuild sleeps at most the lease (and a little jitter) before it
/// reads the entry again, and must still find it.
const FAILURE_MARGIN: Duration = Duration::from_secs(1);

/// What became of a rebuild's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stored {
    /// Written: every caller reads it from now on.
    Written,
    /// Not written: the rebuild lock's lease ended while the loader ran
    /// (another rebuild may hold it now).
    LockLost,
    /// Not written: the entry was invalidated while the loader ran (the
    /// value may predate the invalidation).
    Invalidated,
    /// Not written: a rebuild with a newer token wrote the entry already.
    Newer,
    /// Redis did not answer (or the client closed): whether it was written
    /// is unknown. The value is still what the caller asked for.
    Unknown,
}

/// A rebuild in progress: this caller holds the entry's rebuild lock. Call
/// [`store`](Self::store) with the loader's value or [`fail`](Self::fail)
/// with its failure.
pub struct Rebuild {
    lock: Option<Lock>,
    key: Arc<str>,
    keys: Arc<CacheKeys>,
    options: Arc<CacheOptions>,
    fence: u64,
    started: Instant,
}

impl Rebuild {
    pub(super) fn new(
        lock: Lock,
        key: Arc<str>,
        keys: Arc<CacheKeys>,
        options: Arc<CacheOptions>,
        fence: u64,
    ) -> Self {
        Rebuild {
            lock: Some(lock),
            key,
            keys,
            options,
            fence,
            started: Instant::now(),
        }
    }

    /// The fencing token of this rebuild: the entry is written with it.
    pub fn fence(&self) -> u64 {
        self.fence
    }

    pub fn key(&self) -> &str {
        &self.key
    }

    /// Stores the loader's `value` (`None`: it found nothing, kept for the
    /// `none_ttl`), tagged with the face's `format`, then gives the lock
    /// back. A value too large for Redis is refused before any I/O, and the
    /// rebuild then ends as a failure.
    pub async fn store(self, value: Option<&[u8]>, format: &str) -> Result<Stored> {
        // Boxed: the exchange with Redis is large, and callers nest this in
        // futures of their own (a face's, a loader's).
        Box::pin(self.write(value, format)).await
    }

    async fn write(mut self, value: Option<&[u8]>, format: &str) -> Result<Stored> {
        let lock = self.lock.take().expect("a rebuild ends once");
        if let Err(e) = options::value(&self.key, value) {
            self.end(&lock, &e.to_string()).await;
            return Err(e);
        }
        let (fresh, keep) = self.lifetimes(value.is_none());
        let write = EntryWrite {
            owner: lock.owner(),
            fence: self.fence,
            value,
            format,
            fresh_ms: fresh,
            keep_ms: keep,
            took_ms: self.started.elapsed().as_millis() as u64,
        };
        let deployment = lock.client().context.deployment.current();
        let written = match deployment {
            Ok(d) => d.cache_write(&self.keys, &write).await,
            Err(e) => Err(e),
        };
        let stored = match written {
            Ok(WriteReply::Stored) => {
                // The value is there: the waiters woken by its message read
                // it whether or not the lock is free yet.
                let _ = lock.release().await;
                return Ok(Stored::Written);
            }
            Ok(WriteReply::LockLost) => Ok(Stored::LockLost),
            Ok(WriteReply::Invalidated) => Ok(Stored::Invalidated),
            Ok(WriteReply::Newer) => Ok(Stored::Newer),
            Ok(WriteReply::Foreign) => Err(crate::redis::cached::foreign(&self.keys.entry)),
            Err(e) => {
                tracing::warn!(target: "rlock", key = %self.key, error = %e, "cache entry perhaps not stored");
                Ok(Stored::Unknown)
            }
        };
        tracing::debug!(target: "rlock", key = %self.key, fence = self.fence, outcome = ?stored, "rebuild not stored");
        self.end(&lock, "").await;
        stored
    }

    /// The loader failed with `message`: gives the lock back and tells the
    /// callers waiting for this rebuild, at once (each gets the failure, or
    /// tries again, as its `on_error` says).
    pub async fn fail(mut self, message: &str) -> Result<()> {
        let lock = self.lock.take().expect("a rebuild ends once");
        // An empty failure would read as "nothing to report".
        let message = if message.is_empty() {
            "(no message)"
        } else {
            message
        };
        Box::pin(self.end(&lock, message)).await;
        Ok(())
    }

    /// Gives up without a failure to report (the caller was cancelled):
    /// gives the lock back and wakes the waiting callers, one of whom
    /// rebuilds next. What dropping it does in the background, awaited.
    pub async fn abandon(mut self) {
        if let Some(lock) = self.lock.take() {
            Box::pin(self.end(&lock, "")).await;
        }
    }

    /// How long the entry stays fresh and how long it is kept, in ms: the
    /// ttl less a random share of it (so entries filled together expire
    /// apart), the stale window after it.
    fn lifetimes(&self, none: bool) -> (u64, u64) {
        let o = &self.options;
        let ttl = if none { o.none_ttl_or_default() } else { o.ttl };
        let cut = rand::rng().random_range(0.0..=o.jitter.max(0.0));
        let fresh = ttl.mul_f64(1.0 - cut).max(Duration::from_millis(1));
        let fresh_ms = fresh.as_millis() as u64;
        let keep_ms = match (none, o.stale) {
            (false, Some(stale)) => fresh_ms + stale.as_millis() as u64,
            _ => fresh_ms,
        };
        (fresh_ms, keep_ms)
    }

    /// Gives the lock back and tells the waiting callers that this rebuild
    /// stored nothing (see [`end`]).
    async fn end(&self, lock: &Lock, failure: &str) {
        end(lock, &self.keys, self.fence, failure, self.failure_kept()).await;
    }

    fn failure_kept(&self) -> u64 {
        (self.options.lock_ttl + FAILURE_MARGIN).as_millis() as u64
    }
}

/// Gives the lock back and tells the waiting callers, in one request
/// (`cached/fail.lua`), so a caller woken by it finds the lock free and the
/// failure there together. Renewals of the holding stop while it is sent;
/// when Redis does not answer, a plain release tries again (the waiters
/// then wake by their lease-bounded sleep).
async fn end(lock: &Lock, keys: &CacheKeys, fence: u64, failure: &str, kept_ms: u64) {
    let context = &lock.client().context;
    let told = {
        let releasing = context.holdings.releasing(&lock.keys().lock, lock.owner());
        let told = match context.deployment.current() {
            Ok(d) => {
                d.cache_fail(keys, lock.owner(), fence, failure, kept_ms)
                    .await
            }
            Err(e) => Err(e),
        };
        if told.is_ok() {
            // Given back now, or before (a lost reply), or lost: either way
            // nothing of it is left to renew.
            releasing.forget();
        }
        told
    };
    if let Err(e) = told {
        tracing::debug!(target: "rlock", key = %lock.name(), error = %e, "rebuild end not announced");
        if let Err(e) = lock.release().await {
            tracing::debug!(target: "rlock", key = %lock.name(), error = %e, "rebuild lock not given back");
        }
    }
}

impl Drop for Rebuild {
    fn drop(&mut self) {
        let Some(lock) = self.lock.take() else {
            return;
        };
        // Abandoned (its caller's future dropped, a face's loader never
        // reported): give the lock back and wake the waiters, so one of
        // them rebuilds rather than sleeping out the lease.
        let keys = self.keys.clone();
        let (fence, kept) = (self.fence, self.failure_kept());
        let context = &lock.client().context;
        let runtime = context.runtime().clone();
        // A clean-up of that owner's, which `Client::settled` waits for.
        let cleanup = context.waiters.cleanup(&lock.keys().lock, lock.owner());
        runtime.spawn(async move {
            end(&lock, &keys, fence, "", kept).await;
            drop(cleanup);
        });
    }
}

impl std::fmt::Debug for Rebuild {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rebuild")
            .field("key", &self.key)
            .field("fence", &self.fence)
            .finish()
    }
}
