//! Cache entries: one read (the core's `Cache::read`) hands back a value,
//! or a rebuild the caller must end with the loader's value or failure.
//! Whom a miss makes wait, and what a write may overwrite, are the core's;
//! the face runs its loader and stores what it gives, tagged with its
//! format.

use rlock_core::{CacheArgs, Read, Stored, Unit};

use crate::completion::{self, Done};
use crate::failure::{RLOCK_INTERNAL, RLOCK_INVALID, RLOCK_OK};
use crate::handles::{CLIENTS, REBUILDS};
use crate::requests;
use crate::text::RlockStr;

/// A cache entry's options as the caller gave them, times in milliseconds;
/// each `has_` flag false leaves its option at the core's default (`ttl`
/// has none: it must be given).
#[repr(C)]
pub struct RlockCacheArgs {
    pub ttl_ms: f64,
    pub has_ttl: bool,
    pub stale_ms: f64,
    pub has_stale: bool,
    pub none_ttl_ms: f64,
    pub has_none_ttl: bool,
    pub jitter: f64,
    pub has_jitter: bool,
    pub early: f64,
    pub has_early: bool,
    /// Callers waiting for a rebuild that failed run the loader themselves
    /// (`retry`), instead of sharing its failure (`share`).
    pub retry_on_error: bool,
    pub lock_ttl_ms: f64,
    pub has_lock_ttl: bool,
}

impl RlockCacheArgs {
    fn core(&self) -> CacheArgs {
        let given = |has: bool, v: f64| has.then_some(v);
        CacheArgs {
            ttl: given(self.has_ttl, self.ttl_ms),
            stale: given(self.has_stale, self.stale_ms),
            none_ttl: given(self.has_none_ttl, self.none_ttl_ms),
            jitter: given(self.has_jitter, self.jitter),
            early: given(self.has_early, self.early),
            on_error: self.retry_on_error.then(|| "retry".to_owned()),
            lock_ttl: given(self.has_lock_ttl, self.lock_ttl_ms),
            ..CacheArgs::new(Unit::Millis)
        }
    }
}

/// Reads the cache entry `key` of `client`, waiting for another caller's
/// rebuild of it (cancel the wait with
/// [`rlock_cancel`](crate::requests::rlock_cancel) and the returned id).
/// Completes `token` with count 0 (a hit: the value in data, its format in
/// detail, its fencing token in other), 1 (a load: no value; value is the
/// handle of the rebuild this caller must end) or 2 (a refresh: a value to
/// use now, and a rebuild to end in the background). Bad options or key
/// complete at once with [`RLOCK_INVALID`]. Returns the read's id; 0 when
/// not started (a handle that is not a live client's), and nothing then
/// completes.
///
/// # Safety
/// `key` and `args` are readable during the call.
#[no_mangle]
pub unsafe extern "C" fn rlock_cache_read(
    client: u64,
    key: RlockStr,
    args: *const RlockCacheArgs,
    token: u64,
) -> u64 {
    if !completion::ready() || args.is_null() {
        return 0;
    }
    let Some(client) = CLIENTS.get(client) else {
        return 0;
    };
    requests::guard(token, || {
        let cache = key
            .read("the cache key")
            .and_then(|key| Ok((key, (*args).core().check()?)))
            .and_then(|(key, options)| client.cache(&key, options));
        requests::start(token, true, async move {
            let done = match cache?.read().await? {
                Read::Hit(entry) => Done::Read {
                    kind: 0,
                    rebuild: 0,
                    entry: Some(entry),
                },
                Read::Load(rebuild) => Done::Read {
                    kind: 1,
                    rebuild: REBUILDS.insert(rebuild),
                    entry: None,
                },
                Read::Refresh(entry, rebuild) => Done::Read {
                    kind: 2,
                    rebuild: REBUILDS.insert(rebuild),
                    entry: Some(entry),
                },
            };
            Ok(done)
        })
    })
}

/// Ends the rebuild `rebuild` with the loader's value (`has_value` false:
/// it found nothing, kept for the none ttl), tagged `format`, and gives its
/// lock back. Completes `token` with value 0 (written), 1 (not written: the
/// rebuild lock's lease ended), 2 (not written: the entry was invalidated
/// meanwhile), 3 (not written: a newer rebuild wrote it), 4 (unknown: Redis
/// did not answer); the loader's value is what the caller asked for in
/// every case. Returns [`RLOCK_INVALID`] for a handle that is not a live
/// rebuild's (nothing then completes); the handle is spent either way.
///
/// # Safety
/// `value` and `format` are readable during the call.
#[no_mangle]
pub unsafe extern "C" fn rlock_rebuild_store(
    rebuild: u64,
    value: RlockStr,
    has_value: bool,
    format: RlockStr,
    token: u64,
) -> i32 {
    if !completion::ready() {
        return RLOCK_INTERNAL;
    }
    let Some(rebuild) = REBUILDS.remove(rebuild) else {
        return RLOCK_INVALID;
    };
    requests::guard(token, || {
        let value = has_value.then(|| value.bytes());
        let format = format.read("the format");
        requests::start(token, false, async move {
            let stored = rebuild.store(value.as_deref(), &format?).await?;
            Ok(Done::Value(match stored {
                Stored::Written => 0,
                Stored::LockLost => 1,
                Stored::Invalidated => 2,
                Stored::Newer => 3,
                Stored::Unknown => 4,
            }))
        })
    });
    RLOCK_OK
}

/// Ends the rebuild `rebuild` as failed with `message`: gives its lock back
/// and tells the callers waiting for it. Completes `token` once done.
/// Returns [`RLOCK_INVALID`] for a handle that is not a live rebuild's
/// (nothing then completes).
///
/// # Safety
/// `message` is readable during the call.
#[no_mangle]
pub unsafe extern "C" fn rlock_rebuild_fail(rebuild: u64, message: RlockStr, token: u64) -> i32 {
    if !completion::ready() {
        return RLOCK_INTERNAL;
    }
    let Some(rebuild) = REBUILDS.remove(rebuild) else {
        return RLOCK_INVALID;
    };
    requests::guard(token, || {
        let message = String::from_utf8_lossy(&message.bytes()).into_owned();
        requests::start(token, false, async move {
            rebuild.fail(&message).await?;
            Ok(Done::Value(0))
        })
    });
    RLOCK_OK
}

/// Gives up the rebuild `rebuild` without a failure to report (its caller
/// went away): its lock is given back in the background, and a waiting
/// caller rebuilds next. A handle that is not a live rebuild's does nothing.
#[no_mangle]
pub extern "C" fn rlock_rebuild_free(rebuild: u64) {
    let _ = std::panic::catch_unwind(|| drop(REBUILDS.remove(rebuild)));
}

/// Invalidates the cache entry `key`: completes `token` with value 1 when
/// there was one, 0 otherwise. Returns [`RLOCK_INVALID`] for a handle that
/// is not a live client's (nothing then completes).
///
/// # Safety
/// `key` is readable during the call.
#[no_mangle]
pub unsafe extern "C" fn rlock_invalidate(client: u64, key: RlockStr, token: u64) -> i32 {
    if !completion::ready() {
        return RLOCK_INTERNAL;
    }
    let Some(client) = CLIENTS.get(client) else {
        return RLOCK_INVALID;
    };
    requests::guard(token, || {
        let key = key.read("the cache key");
        requests::start(token, false, async move {
            Ok(Done::Value(u64::from(client.invalidate(&key?).await?)))
        })
    });
    RLOCK_OK
}
