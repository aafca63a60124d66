//! One request at a time, and one wait at a time, per owner and lock in this
//! client.
//!
//! Every request that changes a holding carries the count its owner believes
//! it holds (see `release.lua`), so a request sent again after a lost reply
//! is recognised and not applied twice. Two requests of one owner in flight
//! at once would carry the same count, and the second would be taken for a
//! repeat of the first: so they take turns, whichever `Lock` value (a clone,
//! another handle made for the same owner unit, a background clean-up)
//! sends them. Waits take turns too: two waits of one owner would share its
//! one place in line and one handoff, and could both believe they were
//! handed the lock that Redis counts once; the second wait instead starts
//! when the first ends, and then re-enters at once if the first got it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

/// The turns of one owner on one lock.
#[derive(Default)]
pub(crate) struct OwnerTurns {
    /// Held across one request that changes a holding.
    pub(crate) request: tokio::sync::Mutex<()>,
    /// Held across one acquisition (its whole wait).
    pub(crate) wait: tokio::sync::Mutex<()>,
}

pub(crate) type Turn = Arc<OwnerTurns>;

/// Lock key and owner id.
type OwnerOfLock = (String, Arc<str>);

#[derive(Default)]
pub(crate) struct Turns {
    by_owner: Mutex<HashMap<OwnerOfLock, Weak<OwnerTurns>>>,
    /// Entries at the last sweep: the map is swept of dropped turns when it
    /// doubles, so it stays the size of the live locks.
    swept_at: Mutex<usize>,
}

impl Turns {
    /// The turns of `owner` on the lock at `key`, shared by every `Lock`
    /// value of that owner while any of them lives.
    pub(crate) fn of(&self, key: &str, owner: &Arc<str>) -> Turn {
        let mut map = self.by_owner.lock().unwrap();
        let id = (key.to_owned(), owner.clone());
        if let Some(turn) = map.get(&id).and_then(Weak::upgrade) {
            return turn;
        }
        let turn = Turn::default();
        map.insert(id, Arc::downgrade(&turn));
        let mut swept_at = self.swept_at.lock().unwrap();
        if map.len() > 2 * (*swept_at).max(64) {
            map.retain(|_, t| t.strong_count() > 0);
            *swept_at = map.len();
        }
        turn
    }
}
