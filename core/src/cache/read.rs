//! One read of a cache entry, as a loop over one look at Redis
//! (`cached/read.lua`: the entry, the rebuild in progress, the last failed
//! rebuild, in one round trip):
//!
//! - a fresh entry is the answer (once in a while, as XFetch picks, with an
//!   early refresh for this caller to run in the background);
//! - a stale one within the caller's stale window too, with the refresh
//!   when nobody runs one yet;
//! - otherwise, with no rebuild in progress, this caller takes the rebuild
//!   lock (one attempt: never a turn in line) and loads;
//! - with one in progress, it waits for that rebuild's message on the
//!   entry's channel (joined before its next look, so a message between the
//!   look and the sleep is never missed), each sleep bounded by the
//!   rebuilder's remaining lease, so a lost message or a dead rebuilder
//!   costs at most that lease.

use std::time::Duration;

use rand::Rng;
use tokio::time::Instant;

use super::{Cache, CacheOptions, Entry, OnError, Read, Rebuild};
use crate::error::{Error, Result};
use crate::kind::Kind;
use crate::lock::Lock;
use crate::options::Wait;
use crate::redis::cached::{EntryRead, StoredEntry};
use crate::wakeups::registry::{sleep_bound, Ticket};

/// The sleep bound when the rebuild lock has no expiry (a key of another
/// kind of client): look again this often.
const NO_EXPIRY_BOUND: Duration = Duration::from_secs(1);

/// See [`Cache::read`].
pub(super) async fn run(cache: &Cache) -> Result<Read> {
    let deadline = cache
        .options
        .timeout
        .and_then(|t| Instant::now().checked_add(t));
    // The latest rebuild this caller saw in progress: a failure of it or of
    // a later one is what this caller waited for.
    let mut waited_for: Option<u64> = None;
    let mut ticket: Option<Ticket> = None;
    // Attempts at a lock nobody seemed to hold that failed in a row (the
    // lock taken just then by another caller, or a grant given back as too
    // late): each next one after a growing pause.
    let mut missed = 0u32;
    loop {
        let mut news = ticket.as_ref().map(Ticket::news);
        let look = look(cache).await?;
        if let Some(entry) = &look.entry {
            if let Some(read) = use_entry(cache, entry, &look).await? {
                return Ok(read);
            }
        }
        if let (Some(waited), Some((fence, message))) = (waited_for, &look.failed) {
            if *fence >= waited && cache.options.on_error == OnError::Share {
                return Err(Error::LoaderFailed {
                    key: cache.key.to_string(),
                    message: message.clone(),
                });
            }
        }
        let Some((fence, pttl)) = look.rebuild else {
            if let Some(read) = rebuild(cache, look.entry.as_ref()).await? {
                return Ok(read);
            }
            // Another caller took the lock first (the next look finds its
            // rebuild) or the attempt failed: look again, soon.
            missed += 1;
            pause(missed, deadline).await;
            if deadline.is_some_and(|d| d <= Instant::now()) {
                return Err(timeout(cache));
            }
            continue;
        };
        missed = 0;
        // The rebuild waited for is the one in progress now. An earlier one
        // that lost its lease to it keeps no failure when it fails late
        // (`cached/fail.lua`), so what a look finds kept is the failure of a
        // rebuild that ended holding its lock: this caller's, if it waited
        // for that rebuild or an earlier one.
        waited_for = Some(waited_for.map_or(fence, |w| w.max(fence)));
        let Some(t) = &ticket else {
            ticket = Some(
                cache
                    .client
                    .context
                    .join(&cache.keys.news, None, deadline)
                    .await,
            );
            // The join is cut at the deadline: no look after it.
            if deadline.is_some_and(|d| d <= Instant::now()) {
                return Err(timeout(cache));
            }
            continue;
        };
        let now = Instant::now();
        if deadline.is_some_and(|d| d <= now) {
            return Err(timeout(cache));
        }
        let mut until = now + sleep_bound(pttl, NO_EXPIRY_BOUND);
        if let Some(d) = deadline {
            until = until.min(d);
        }
        let news = news.get_or_insert_with(|| t.news());
        let _ = tokio::time::timeout_at(until, news.changed()).await;
    }
}

async fn look(cache: &Cache) -> Result<EntryRead> {
    let deployment = cache.client.context.deployment.current()?;
    deployment.cache_read(&cache.keys).await
}

/// What an entry found gives this caller: the answer, or `None` when it is
/// too stale for this caller to use.
async fn use_entry(cache: &Cache, stored: &StoredEntry, look: &EntryRead) -> Result<Option<Read>> {
    if !usable(cache, stored) {
        return Ok(None);
    }
    let entry = Entry {
        value: stored.value.clone(),
        format: stored.format.clone(),
        fence: stored.fence,
    };
    // Stale (within this caller's window): refreshed by whoever looks first.
    let refresh = stored.fresh_ms <= 0 || refresh_early(stored, &cache.options);
    if refresh && look.rebuild.is_none() {
        if let Some(rb) = take_lock(cache).await? {
            return Ok(Some(refresh_or_newer(cache, rb, stored, entry).await?));
        }
    }
    Ok(Some(Read::Hit(entry)))
}

/// XFetch (Vattani, Chierichetti, Lowenstein, VLDB 2015): refresh now with
/// a probability that rises as expiry nears, faster for entries slow to
/// rebuild, so one caller refreshes a hot entry before anyone misses it.
/// Only within the last [`EARLY_WINDOW`] of the entry's ttl: XFetch's window
/// (`took × early × ln(reads per took)`) outgrows a short ttl under many
/// readers, and then every read right after a rebuild started the next one.
fn refresh_early(e: &StoredEntry, options: &CacheOptions) -> bool {
    let beta = options.early;
    if beta <= 0.0 || e.took_ms == 0 {
        return false;
    }
    let window_ms = options.ttl.as_secs_f64() * 1000.0 * EARLY_WINDOW;
    if e.fresh_ms as f64 > window_ms {
        return false;
    }
    // 1 - [0, 1) is (0, 1]: its logarithm is finite.
    let u: f64 = 1.0 - rand::rng().random::<f64>();
    e.took_ms as f64 * beta * -u.ln() >= e.fresh_ms as f64
}

/// The share of an entry's ttl at its end within which a read may refresh
/// it early: at most one early load per ttl and a quarter.
const EARLY_WINDOW: f64 = 0.25;

/// After `missed` failed attempts in a row: none after the first (another
/// caller's rebuild is then in the next look), then 1, 2, 4 ... up to 50 ms
/// with jitter, never past `deadline`.
async fn pause(missed: u32, deadline: Option<Instant>) {
    if missed < 2 {
        return;
    }
    let ms = (1u64 << (missed - 2).min(6)).min(50);
    let pause = Duration::from_millis(rand::rng().random_range(ms / 2..=ms));
    let until = Instant::now() + pause;
    tokio::time::sleep_until(deadline.map_or(until, |d| d.min(until))).await;
}

/// The rebuild lock, taken in one attempt by a new owner. A key of another
/// type in its way (someone else's data, a fence counter that is no number)
/// is reported, not taken for a busy lock.
async fn take_lock(cache: &Cache) -> Result<Option<Rebuild>> {
    // On the client's runtime, awaited: a caller that leaves meanwhile
    // leaves a grant that lands to a Rebuild dropped unfinished, which gives
    // the lock back and tells the callers that saw it in progress (a bare
    // release would leave them asleep for its whole lease).
    let cache = cache.clone();
    let runtime = cache.client.context.runtime().clone();
    match runtime
        .spawn(async move { take_lock_now(&cache).await })
        .await
    {
        Ok(taken) => taken,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        // The runtime is shutting down: the client is gone.
        Err(_) => Err(Error::Closed),
    }
}

async fn take_lock_now(cache: &Cache) -> Result<Option<Rebuild>> {
    let client = &cache.client;
    let handle = client
        .context
        .next_handle
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let lock = Lock::new(
        client.clone(),
        &cache.key,
        cache.options.lock(),
        &format!("c{handle}"),
        Kind::Rebuild,
    )?;
    let acquired = match lock.acquire(Wait::Once).await {
        Ok(acquired) => acquired,
        Err(Error::Busy { .. }) => return Ok(None),
        Err(Error::Timeout {
            cause: Some(cause), ..
        }) => return Err(Error::Connection(cause)),
        Err(e) => return Err(e),
    };
    Ok(Some(Rebuild::new(
        lock,
        cache.key.clone(),
        cache.keys.clone(),
        cache.options.clone(),
        acquired.fencing_token,
    )))
}

/// A rebuild of an entry that was missing (or too stale for this caller):
/// `None` when another caller holds the lock.
async fn rebuild(cache: &Cache, seen: Option<&StoredEntry>) -> Result<Option<Read>> {
    let Some(rb) = take_lock(cache).await? else {
        return Ok(None);
    };
    // Written between this caller's look and its lock (the rebuild before
    // let go just then)? Then that value is the answer, not a second load.
    let again = look(cache).await?;
    match again.entry {
        Some(e) if newer(&e, seen) && usable(cache, &e) => {
            drop(rb);
            Ok(Some(Read::Hit(Entry {
                value: e.value,
                format: e.format,
                fence: e.fence,
            })))
        }
        _ => Ok(Some(Read::Load(rb))),
    }
}

/// A refresh, unless the entry was refreshed between this caller's look and
/// its lock: then the newer value, and no refresh.
async fn refresh_or_newer(
    cache: &Cache,
    rb: Rebuild,
    seen: &StoredEntry,
    entry: Entry,
) -> Result<Read> {
    let again = look(cache).await?;
    match again.entry {
        Some(e) if newer(&e, Some(seen)) && e.fresh_ms > 0 => {
            drop(rb);
            Ok(Read::Hit(Entry {
                value: e.value,
                format: e.format,
                fence: e.fence,
            }))
        }
        _ => Ok(Read::Refresh(entry, rb)),
    }
}

fn newer(e: &StoredEntry, seen: Option<&StoredEntry>) -> bool {
    seen.is_none_or(|s| e.fence != s.fence)
}

/// Whether this caller may use an entry as it is: fresh, or stale within its
/// window.
fn usable(cache: &Cache, e: &StoredEntry) -> bool {
    e.fresh_ms > 0
        || cache
            .options
            .stale
            .is_some_and(|s| (-e.fresh_ms) as u128 <= s.as_millis())
}

fn timeout(cache: &Cache) -> Error {
    Error::Timeout {
        name: cache.key.to_string(),
        cause: Some("waiting for another caller's rebuild of this cache entry".into()),
    }
}
