//! Locks: a lock handle is one core `Lock` (a mutex, a side of a read-write
//! lock, or permits of a semaphore), one owner (acquiring it again while
//! held nests). Every kind is acquired and released through the same calls.

use rlock_core::{Client, Lock, LockArgs, LockOptions, Unit, Wait};

use crate::completion::{self, Done};
use crate::failure::{RLOCK_INTERNAL, RLOCK_INVALID, RLOCK_LOST, RLOCK_NOT_OWNER, RLOCK_OK};
use crate::handles::{CLIENTS, LOCKS, SEMAPHORES};
use crate::requests;
use crate::text::RlockStr;

/// A lock's options as the caller gave them, times in milliseconds; each
/// `has_` flag false leaves its option at the core's default.
#[repr(C)]
pub struct RlockLockArgs {
    pub ttl_ms: f64,
    pub has_ttl: bool,
    pub auto_renew: bool,
    pub max_hold_ms: f64,
    pub has_max_hold: bool,
    pub sync_replicas: f64,
    pub has_sync_replicas: bool,
    pub fair: bool,
    pub queue_after_ms: f64,
    pub has_queue_after: bool,
    pub allow_long_ttl: bool,
}

impl RlockLockArgs {
    fn core(&self) -> LockArgs {
        let given = |has: bool, v: f64| has.then_some(v);
        LockArgs {
            ttl: given(self.has_ttl, self.ttl_ms),
            auto_renew: self.auto_renew,
            max_hold: given(self.has_max_hold, self.max_hold_ms),
            sync_replicas: given(self.has_sync_replicas, self.sync_replicas),
            fair: self.fair,
            queue_after: given(self.has_queue_after, self.queue_after_ms),
            allow_long_ttl: self.allow_long_ttl,
            ..LockArgs::new(Unit::Millis)
        }
    }
}

/// Makes the mutex `name` of `client`, every option checked before any
/// I/O: completes `token` before returning, with the lock's handle as its
/// value or [`RLOCK_INVALID`](crate::failure::RLOCK_INVALID) naming the
/// option at fault.
///
/// Returns [`RLOCK_INVALID`] for a client handle that is not a live
/// client's (nothing then completes).
///
/// # Safety
/// `name` and `args` are readable during the call.
#[no_mangle]
pub unsafe extern "C" fn rlock_mutex_new(
    client: u64,
    name: RlockStr,
    args: *const RlockLockArgs,
    token: u64,
) -> i32 {
    make(client, name, args, token, |client, name, options| {
        Ok(Done::Value(LOCKS.insert(client.lock_with(name, options)?)))
    })
}

/// Makes the read-write lock `name` of `client`, checked as
/// [`rlock_mutex_new`] is: completes `token` with its write side's handle as
/// value and its read side's as other, the two sides of one owner (a read
/// inside a write nests, a downgrade keeps writers out; an upgrade is
/// refused, [`RLOCK_UPGRADE`](crate::failure::RLOCK_UPGRADE)).
///
/// # Safety
/// As [`rlock_mutex_new`].
#[no_mangle]
pub unsafe extern "C" fn rlock_rwlock_new(
    client: u64,
    name: RlockStr,
    args: *const RlockLockArgs,
    token: u64,
) -> i32 {
    make(client, name, args, token, |client, name, options| {
        let rw = client.rw_lock(name, options)?;
        Ok(Done::Pair(
            LOCKS.insert(rw.write().clone()),
            LOCKS.insert(rw.read().clone()),
        ))
    })
}

/// Makes the semaphore `name` of `permits` permits of `client`, checked as
/// [`rlock_mutex_new`] is (and `permits` at least 1): completes `token` with
/// the handle of its lock taking one permit at each acquisition as value,
/// and the semaphore's handle as other (for [`rlock_semaphore_permits`]).
///
/// # Safety
/// As [`rlock_mutex_new`].
#[no_mangle]
pub unsafe extern "C" fn rlock_semaphore_new(
    client: u64,
    name: RlockStr,
    permits: i64,
    args: *const RlockLockArgs,
    token: u64,
) -> i32 {
    make(client, name, args, token, |client, name, options| {
        let semaphore = client.semaphore(name, permits, options)?;
        let one = LOCKS.insert(semaphore.permits(1)?);
        Ok(Done::Pair(one, SEMAPHORES.insert(semaphore)))
    })
}

/// The lock of the semaphore `semaphore` taking `take` permits (1 to its
/// size) at each acquisition, of the same owner as its other locks:
/// completes `token` before returning, with the lock's handle as value, or
/// [`RLOCK_INVALID`] naming `permits`. Returns [`RLOCK_INVALID`] for a
/// handle that is not a live semaphore's (nothing then completes).
#[no_mangle]
pub extern "C" fn rlock_semaphore_permits(semaphore: u64, take: i64, token: u64) -> i32 {
    if !completion::ready() {
        return RLOCK_INTERNAL;
    }
    let Some(semaphore) = SEMAPHORES.get(semaphore) else {
        return RLOCK_INVALID;
    };
    requests::guard(token, || {
        let lock = semaphore
            .permits(take)
            .map(|l| Done::Value(LOCKS.insert(l)));
        completion::complete(token, lock);
        0
    });
    RLOCK_OK
}

/// Frees a semaphore's handle (its locks' handles stay valid); a handle
/// that is not a live semaphore's does nothing.
#[no_mangle]
pub extern "C" fn rlock_semaphore_free(semaphore: u64) {
    let _ = std::panic::catch_unwind(|| drop(SEMAPHORES.remove(semaphore)));
}

/// What every `_new` call does: reads and checks the name and options,
/// makes the lock with `new`, and completes `token` before returning.
unsafe fn make(
    client: u64,
    name: RlockStr,
    args: *const RlockLockArgs,
    token: u64,
    new: impl FnOnce(&Client, &str, LockOptions) -> rlock_core::Result<Done>,
) -> i32 {
    if !completion::ready() || args.is_null() {
        return RLOCK_INTERNAL;
    }
    let Some(client) = CLIENTS.get(client) else {
        return RLOCK_INVALID;
    };
    requests::guard(token, || {
        let made = name
            .read("the lock name")
            .and_then(|name| Ok((name, (*args).core().check()?.0)))
            .and_then(|(name, options)| new(&client, &name, options));
        completion::complete(token, made);
        0
    });
    RLOCK_OK
}

/// Acquires: waits until it is held (cancel the wait with
/// [`rlock_cancel`](crate::requests::rlock_cancel) and the returned id), or
/// with `once` makes one attempt ([`RLOCK_BUSY`](crate::failure::RLOCK_BUSY)
/// when held elsewhere). Completes `token` with the fencing token as value
/// and the re-entry depth as count. Completes `lost_token` exactly once,
/// after: [`RLOCK_LOST`](crate::failure::RLOCK_LOST) when the holding this
/// acquisition began or re-entered is lost (its reason as detail),
/// [`RLOCK_OK`] when it ended otherwise, or at once when this acquisition
/// got none (it failed, or was cancelled). Returns the wait's id; 0 when not
/// started (a handle that is not a live lock's), and nothing then
/// completes. An acquisition that only waits for its own replies is done on
/// the calling thread, its completion called before this returns; one that
/// waits for more (a lock held elsewhere) goes on on the runtime's thread.
/// Each acquisition is told of its own holding's loss, so acquisitions of
/// one lock may complete in any order.
#[no_mangle]
pub extern "C" fn rlock_lock_acquire(lock: u64, once: bool, token: u64, lost_token: u64) -> u64 {
    if !completion::ready() {
        return 0;
    }
    let Some(lock) = LOCKS.get(lock) else {
        return 0;
    };
    requests::guard(token, || {
        let lost = LostNotice(Some(lost_token));
        requests::start(token, true, async move {
            let wait = if once { Wait::Once } else { Wait::Forever };
            let acquired = lock.acquire(wait).await?;
            lost.watch(&lock);
            Ok(Done::Acquired {
                fence: acquired.fencing_token,
                count: acquired.count,
            })
        })
    })
}

/// The completion owed to a `lost_token`: made by the watcher of the
/// holding it was handed to, or else when dropped.
struct LostNotice(Option<u64>);

impl LostNotice {
    fn watch(mut self, lock: &Lock) {
        let Some(token) = self.0.take() else { return };
        let lost = lock.lost_signal();
        let name = lock.name().to_owned();
        let fence = lock.fencing_token().unwrap_or(0);
        requests::spawn_guarded(token, async move {
            match lost.await {
                Some(reason) => {
                    let (_, message, detail) =
                        crate::failure::describe(&rlock_core::Error::Lost { name, reason });
                    completion::lost(token, fence, &message, &detail);
                }
                None => completion::complete(token, Ok(Done::Value(fence))),
            }
        });
    }
}

impl Drop for LostNotice {
    fn drop(&mut self) {
        if let Some(token) = self.0.take() {
            completion::complete(token, Ok(Done::Value(0)));
        }
    }
}

/// Releases one acquisition (the holding ends with the last), reporting a
/// lease that ended while it was held: completes `token` with
/// [`RLOCK_OK`], or [`RLOCK_LOST`](crate::failure::RLOCK_LOST) (also when
/// Redis says another holds it now), or
/// [`RLOCK_NOT_OWNER`](crate::failure::RLOCK_NOT_OWNER) when this owner held
/// nothing. Returns [`RLOCK_INVALID`] for a handle that is not a live lock's
/// (nothing then completes).
#[no_mangle]
pub extern "C" fn rlock_lock_release(lock: u64, token: u64) -> i32 {
    if !completion::ready() {
        return RLOCK_INTERNAL;
    }
    let Some(lock) = LOCKS.get(lock) else {
        return RLOCK_INVALID;
    };
    requests::guard(token, || {
        requests::start(token, false, async move {
            lock.finish().await?;
            Ok(Done::Value(0))
        })
    });
    RLOCK_OK
}

/// Resets the lease of the holding this owner has to `ttl_ms` (with
/// `has_ttl`; else the lock's own ttl), checked before any I/O; later
/// renewals keep it. Completes `token` with [`RLOCK_OK`], or
/// [`RLOCK_NOT_OWNER`](crate::failure::RLOCK_NOT_OWNER) /
/// [`RLOCK_LOST`](crate::failure::RLOCK_LOST). Returns [`RLOCK_INVALID`] for
/// a handle that is not a live lock's (nothing then completes).
#[no_mangle]
pub extern "C" fn rlock_lock_extend(lock: u64, ttl_ms: f64, has_ttl: bool, token: u64) -> i32 {
    if !completion::ready() {
        return RLOCK_INTERNAL;
    }
    let Some(lock) = LOCKS.get(lock) else {
        return RLOCK_INVALID;
    };
    requests::guard(token, || {
        let ttl = has_ttl
            .then(|| rlock_core::validate::lease(rlock_core::OptionName::Ttl, ttl_ms, Unit::Millis))
            .transpose();
        requests::start(token, false, async move {
            lock.extend(ttl?).await?;
            Ok(Done::Value(0))
        })
    });
    RLOCK_OK
}

/// Whether the holding this owner has now has ended, read at once from the
/// client's clock (a lease past its end counts as lost even before the
/// renewal loop wakes to say so, which then completes the acquisition's
/// `lost_token`): [`RLOCK_LOST`](crate::failure::RLOCK_LOST) when it has,
/// [`RLOCK_OK`] while it runs,
/// [`RLOCK_NOT_OWNER`](crate::failure::RLOCK_NOT_OWNER) when this owner holds
/// nothing, [`RLOCK_INVALID`] for a handle that is not a live lock's. Never
/// blocks and sends nothing. (Not by token: under Redlock the token an
/// acquisition reports and the one a re-entry leaves may differ.)
#[no_mangle]
pub extern "C" fn rlock_lock_lost(lock: u64) -> i32 {
    std::panic::catch_unwind(|| {
        let Some(lock) = LOCKS.get(lock) else {
            return RLOCK_INVALID;
        };
        match lock.lost() {
            Some(_) => RLOCK_LOST,
            None if lock.count() == 0 => RLOCK_NOT_OWNER,
            None => RLOCK_OK,
        }
    })
    .unwrap_or(RLOCK_INTERNAL)
}

/// Frees a lock handle; a handle that is not a live lock's does nothing. A
/// holding it still has is not released: it is renewed until its client
/// closes (release first).
#[no_mangle]
pub extern "C" fn rlock_lock_free(lock: u64) {
    let _ = std::panic::catch_unwind(|| drop(LOCKS.remove(lock)));
}
