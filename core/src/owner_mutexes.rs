//! One request at a time, and one wait at a time, per owner and lock in this
//! client: a mutex in this process per owner and lock for its requests, and
//! one for its waits.
//!
//! Every request that changes a holding carries the count its owner believes
//! it holds (see `release.lua`), so a request sent again after a lost reply
//! is recognised and not applied twice. Two requests of one owner in flight
//! at once would carry the same count, and the second would be taken for a
//! repeat of the first: so they go one at a time, whichever `Lock` value (a clone,
//! another handle made for the same owner unit, a background clean-up)
//! sends them. Waits go one at a time too: two waits of one owner would share its
//! one place in line and one handoff, and could both believe they were
//! handed the lock that Redis counts once; the second wait instead starts
//! when the first ends, and then re-enters at once if the first got it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

/// The two mutexes of one owner on one lock.
#[derive(Default)]
pub(crate) struct OwnerMutexes {
    /// Held across one request that changes a holding.
    pub(crate) request: tokio::sync::Mutex<()>,
    /// Held across one acquisition (its whole wait).
    pub(crate) wait: tokio::sync::Mutex<()>,
}

/// Lock key and owner id.
type OwnerOfLock = (String, Arc<str>);

#[derive(Default)]
pub(crate) struct OwnerMutexTable {
    by_owner: Mutex<HashMap<OwnerOfLock, Weak<OwnerMutexes>>>,
    /// Entries at the last sweep: the map is swept of dropped entries when it
    /// doubles, so it stays the size of the live locks.
    swept_at: Mutex<usize>,
}

impl OwnerMutexTable {
    /// The mutexes of `owner` on the lock at `key`, shared by every `Lock`
    /// value of that owner while any of them lives.
    pub(crate) fn of(&self, key: &str, owner: &Arc<str>) -> Arc<OwnerMutexes> {
        let mut map = self.by_owner.lock().unwrap();
        let id = (key.to_owned(), owner.clone());
        if let Some(mutexes) = map.get(&id).and_then(Weak::upgrade) {
            return mutexes;
        }
        let mutexes = Arc::<OwnerMutexes>::default();
        map.insert(id, Arc::downgrade(&mutexes));
        let mut swept_at = self.swept_at.lock().unwrap();
        if map.len() > 2 * (*swept_at).max(64) {
            map.retain(|_, t| t.strong_count() > 0);
            *swept_at = map.len();
        }
        mutexes
    }
}
