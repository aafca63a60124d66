//! `cached`: the cache-aside read that cannot stampede. On a miss exactly one
//! caller, in any process and language, rebuilds the entry under its rebuild
//! lock, while the others wait for the value it writes (woken by a message,
//! not polling) rather than for their own turn at the database. Its write is
//! fenced (see `core/lua/cache/write.lua`): a rebuild whose lease ended, or that
//! an invalidation overtook, never overwrites what is newer.
//!
//! The core reads and writes bytes; a face encodes values its own way and
//! tags them with a format, and runs the loader itself: [`Cache::read`] says
//! whether the caller has its value ([`Read::Hit`]), must run the loader and
//! store what it gives ([`Read::Load`]), or has a value and refreshes it in
//! the background ([`Read::Refresh`]: stale-while-revalidate, or an early
//! refresh that XFetch picked).

mod options;
mod read;
mod rebuild;

use std::future::Future;
use std::sync::Arc;

pub use options::{
    CacheArgs, CacheOptions, OnError, DEFAULT_EARLY, DEFAULT_JITTER, DEFAULT_NONE_TTL,
    MAX_VALUE_BYTES,
};
pub use rebuild::{Rebuild, Stored};

use crate::context::Client;
use crate::error::{Error, Result};
use crate::keys::CacheKeys;
use crate::redis::cached::redlock_refused;

/// One cache entry by key, with how it is read and rebuilt. Cheap to clone.
#[derive(Clone)]
pub struct Cache {
    client: Client,
    key: Arc<str>,
    keys: Arc<CacheKeys>,
    options: Arc<CacheOptions>,
}

/// A value as the cache holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// `None`: the loader found nothing (a negative entry).
    pub value: Option<Vec<u8>>,
    /// How the face that wrote it encoded it (its own tag, opaque to the
    /// core).
    pub format: String,
    /// The fencing token of the rebuild that wrote it.
    pub fence: u64,
}

/// What a read gives its caller.
pub enum Read {
    /// The value, fresh (or stale within the caller's stale window while
    /// another caller refreshes it).
    Hit(Entry),
    /// The value to use now, and a refresh this caller runs in the
    /// background: the loader, then [`Rebuild::store`].
    Refresh(Entry, Rebuild),
    /// No value: this caller runs the loader now and stores what it gives.
    Load(Rebuild),
}

impl Cache {
    pub(crate) fn new(client: Client, key: &str, options: CacheOptions) -> Result<Self> {
        crate::options::cache_key(key)?;
        options.check()?;
        if client.context.deployment.is_redlock() {
            // Each master would keep an entry of its own.
            return Err(redlock_refused());
        }
        let keys = Arc::new(CacheKeys::new(&client.context.prefix, key));
        Ok(Cache {
            client,
            key: Arc::from(key),
            keys,
            options: Arc::new(options),
        })
    }

    pub fn key(&self) -> &str {
        &self.key
    }

    pub fn options(&self) -> &CacheOptions {
        &self.options
    }

    /// Reads the entry, waiting for another caller's rebuild when there is
    /// no value to use (see [`Read`]). Fails with [`Error::Timeout`] when
    /// that rebuild outlasts the `timeout` option, and with
    /// [`Error::LoaderFailed`] when its loader failed (unless `on_error` is
    /// `retry`).
    pub async fn read(&self) -> Result<Read> {
        Box::pin(read::run(self)).await
    }

    /// The value of the entry (`None`: the loader found nothing), from the
    /// cache or from `loader`, run by one caller across every process while
    /// the others wait for what it stores; a refresh runs `loader` on the
    /// client's runtime while this caller gets the current value. The
    /// loader's failure is [`Error::LoaderFailed`] with its message.
    pub async fn get<F, Fut, E>(&self, loader: F) -> Result<Option<Vec<u8>>>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = std::result::Result<Option<Vec<u8>>, E>> + Send + 'static,
        E: std::fmt::Display,
    {
        match self.read().await? {
            Read::Hit(entry) => Ok(entry.value),
            Read::Load(rebuild) => load(rebuild, loader).await,
            Read::Refresh(entry, rebuild) => {
                let runtime = self.client.context.runtime().clone();
                let telemetry = self.client.context.telemetry.clone();
                let key = self.key.clone();
                runtime.spawn(async move {
                    if let Err(e) = load(rebuild, loader).await {
                        telemetry.error(format!("cache refresh of {key} failed: {e}"));
                    }
                });
                Ok(entry.value)
            }
        }
    }
}

/// The format [`Cache::get`] tags its values with: bytes, as they are.
pub const BYTES: &str = "bytes";

async fn load<F, Fut, E>(rebuild: Rebuild, loader: F) -> Result<Option<Vec<u8>>>
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = std::result::Result<Option<Vec<u8>>, E>>,
    E: std::fmt::Display,
{
    let key = rebuild.key().to_owned();
    let loaded = loader().await.map_err(|e| e.to_string());
    match loaded {
        Ok(value) => {
            // Not stored (a lease lost, an invalidation, a newer value, Redis
            // unreachable): the value is still what this caller asked for.
            rebuild.store(value.as_deref(), BYTES).await?;
            Ok(value)
        }
        Err(message) => {
            rebuild.fail(&message).await?;
            Err(Error::LoaderFailed { key, message })
        }
    }
}

/// Refuses, before connecting, a cache over `urls` servers that would be a
/// Redlock (several masters, not the seeds of one Cluster): each master
/// would keep an entry of its own.
pub fn cache_servers(urls: usize, cluster: bool) -> Result<()> {
    match urls > 1 && !cluster {
        true => Err(redlock_refused()),
        false => Ok(()),
    }
}

/// See [`Client::invalidate`].
pub(crate) async fn invalidate(client: &Client, key: &str) -> Result<bool> {
    crate::options::cache_key(key)?;
    if client.context.deployment.is_redlock() {
        return Err(redlock_refused());
    }
    let keys = CacheKeys::new(&client.context.prefix, key);
    client
        .context
        .deployment
        .current()?
        .cache_invalidate(&keys)
        .await
}
