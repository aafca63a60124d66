//! The requests of a cache entry (`core/lua/cache/`) and their replies. A cache
//! lives on one deployment (a server, Sentinel or Cluster: never Redlock,
//! whose masters would each keep another entry), so each request goes to its
//! one endpoint, and is sent again once when the connection dropped under
//! it: every cache script is safe to repeat (see each one's header).

use redis::{FromRedisValue, RedisResult, Value};

use super::deployment::Deployment;
use super::endpoint::{is_transient, Member};
use super::scripts::{cached, Call};
use crate::error::{Error, Result};
use crate::keys::CacheKeys;

/// What `cached/read.lua` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EntryRead {
    pub(crate) entry: Option<StoredEntry>,
    /// The rebuild in progress: its fencing token and remaining lease
    /// (ms; -1: no expiry).
    pub(crate) rebuild: Option<(u64, i64)>,
    /// The last failed rebuild: its fencing token and its failure.
    pub(crate) failed: Option<(u64, String)>,
}

/// An entry as Redis keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StoredEntry {
    /// `None`: a negative entry (the loader found nothing).
    pub(crate) value: Option<Vec<u8>>,
    pub(crate) format: String,
    pub(crate) fence: u64,
    /// How long it stays fresh (<= 0: stale by that much).
    pub(crate) fresh_ms: i64,
    /// How long the rebuild that wrote it took.
    pub(crate) took_ms: u64,
}

/// What `cached/write.lua` answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WriteReply {
    Stored,
    /// The rebuild lock is not held under this token any more.
    LockLost,
    Invalidated,
    /// An entry written under a newer token is there.
    Newer,
    /// The entry's key holds a value of another type.
    Foreign,
}

/// What a rebuild writes.
pub(crate) struct EntryWrite<'a> {
    pub(crate) owner: &'a str,
    pub(crate) fence: u64,
    pub(crate) value: Option<&'a [u8]>,
    pub(crate) format: &'a str,
    pub(crate) fresh_ms: u64,
    pub(crate) keep_ms: u64,
    pub(crate) took_ms: u64,
}

impl Deployment {
    fn cache_member(&self) -> Result<&Member> {
        match self.members() {
            [member] => Ok(member),
            _ => Err(redlock_refused()),
        }
    }

    /// Runs `call` on the cache's endpoint, once more if the connection
    /// dropped under the first send.
    async fn cache_call<T: FromRedisValue>(&self, call: &Call<'_>) -> Result<T> {
        let member = self.cache_member()?;
        let r: RedisResult<T> = match member.call(call).await {
            Err(e) if is_transient(&e) => member.call(call).await,
            other => other,
        };
        r.map_err(|e| self.error(member, &e))
    }

    pub(crate) async fn cache_read(&self, keys: &CacheKeys) -> Result<EntryRead> {
        let call = cached::READ.call(&[&keys.entry, &keys.rebuild.lock, &keys.failed]);
        let reply: Vec<Value> = self.cache_call(&call).await?;
        parse_read(&reply, keys).unwrap_or_else(|| {
            Err(Error::Connection(format!(
                "unexpected reply of cached/read.lua: {reply:?}"
            )))
        })
    }

    pub(crate) async fn cache_write(
        &self,
        keys: &CacheKeys,
        w: &EntryWrite<'_>,
    ) -> Result<WriteReply> {
        let publish = self.cache_member()?.publish_command();
        let call = cached::WRITE
            .call(&[&keys.entry, &keys.rebuild.lock, &keys.failed, &keys.news])
            .arg(w.owner)
            .arg(w.fence)
            .arg(w.value.unwrap_or_default())
            .arg(w.format)
            .arg(if w.value.is_none() { "1" } else { "0" })
            .arg(w.fresh_ms)
            .arg(w.keep_ms)
            .arg(w.took_ms)
            .arg(publish);
        let reply: i64 = self.cache_call(&call).await?;
        Ok(match reply {
            1 => WriteReply::Stored,
            -1 => WriteReply::LockLost,
            -2 => WriteReply::Invalidated,
            -3 => WriteReply::Newer,
            _ => WriteReply::Foreign,
        })
    }

    /// Ends the rebuild `fence` of `owner` that stored nothing: gives the
    /// rebuild lock back and tells the callers waiting for it, at once;
    /// `failure` (not empty) is kept `keep_ms` for them to read. Whether
    /// this request gave the lock back (not: it was given back or lost
    /// before).
    pub(crate) async fn cache_fail(
        &self,
        keys: &CacheKeys,
        owner: &str,
        fence: u64,
        failure: &str,
        keep_ms: u64,
    ) -> Result<bool> {
        let publish = self.cache_member()?.publish_command();
        let call = cached::FAIL
            .call(&[&keys.failed, &keys.news, &keys.rebuild.lock])
            .arg(owner)
            .arg(fence)
            .arg(failure)
            .arg(keep_ms)
            .arg(publish);
        let gave: i64 = self.cache_call(&call).await?;
        Ok(gave == 1)
    }

    /// Deletes the entry; whether there was one.
    pub(crate) async fn cache_invalidate(&self, keys: &CacheKeys) -> Result<bool> {
        let call = cached::INVALIDATE.call(&[&keys.entry, &keys.rebuild.lock, &keys.failed]);
        let reply: i64 = self.cache_call(&call).await?;
        match reply {
            -1 => Err(foreign(&keys.entry)),
            -2 => Err(foreign(&keys.rebuild.lock)),
            -3 => Err(foreign(&keys.failed)),
            n => Ok(n > 0),
        }
    }
}

/// A cache on Redlock: each master would keep an entry of its own.
pub(crate) fn redlock_refused() -> Error {
    Error::invalid("cached needs one Redis deployment (a server, Sentinel or Cluster), not Redlock")
}

/// A key of the cache holds someone else's data (another type, or not the
/// shape this cache writes): reported, never overwritten.
pub(crate) fn foreign(key: &str) -> Error {
    Error::Connection(format!(
        "the key {key} holds a value that is not this cache's (left alone)"
    ))
}

/// The reply of `cached/read.lua`; `None` when it is none of its shapes.
fn parse_read(v: &[Value], keys: &CacheKeys) -> Option<Result<EntryRead>> {
    let int = |i: usize| -> Option<i64> { i64::from_redis_value(v.get(i)?.clone()).ok() };
    let bytes = |i: usize| -> Option<Vec<u8>> {
        match v.get(i)? {
            Value::Nil => Some(Vec::new()),
            other => Vec::<u8>::from_redis_value(other.clone()).ok(),
        }
    };
    let text = |i: usize| -> Option<String> { String::from_utf8(bytes(i)?).ok() };
    let state = int(0)?;
    if state < 0 {
        let key = match state {
            -1 => &keys.entry,
            -2 => &keys.rebuild.lock,
            _ => &keys.failed,
        };
        return Some(Err(foreign(key)));
    }
    let entry = (state > 0).then(|| -> Option<StoredEntry> {
        Some(StoredEntry {
            value: (state == 1).then(|| bytes(1)).flatten(),
            format: text(2)?,
            fence: u64::try_from(int(3)?).ok()?,
            fresh_ms: int(4)?,
            took_ms: u64::try_from(int(5)?).unwrap_or(0),
        })
    });
    let entry = match entry {
        Some(e) => Some(e?),
        None => None,
    };
    let lock_fence = u64::try_from(int(6)?).unwrap_or(0);
    let failed_fence = u64::try_from(int(8)?).unwrap_or(0);
    Some(Ok(EntryRead {
        entry,
        rebuild: (lock_fence > 0).then(|| (lock_fence, int(7).unwrap_or(-1))),
        failed: (failed_fence > 0).then(|| (failed_fence, text(9).unwrap_or_default())),
    }))
}
