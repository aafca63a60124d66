//! The last releases this client reported, by (lock key, owner): so that a
//! release or extend of a lock the owner no longer holds can say "already
//! released" rather than "not acquired". Bounded: a long-lived client that
//! releases many names keeps the same small table, and a name forgotten that
//! way only makes a later refusal say "not acquired by this owner".

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashSet, VecDeque};
use std::hash::{Hash, Hasher};

/// How many releases are remembered: enough for any owner's recent mistakes,
/// small enough (8 bytes each) to never show in a client's memory.
pub(crate) const REMEMBERED: usize = 1024;

/// The last [`REMEMBERED`] releases, oldest first. Each is kept as a hash of
/// (key, owner): a lock name may be up to a megabyte long, and a collision
/// only changes the wording of a refusal, never a decision.
#[derive(Default)]
pub(crate) struct Released {
    order: VecDeque<u64>,
    set: HashSet<u64>,
}

impl Released {
    /// Remembers that `owner`'s holding of `key` was released (and the owner
    /// told so), forgetting the oldest release beyond the bound.
    pub(crate) fn remember(&mut self, key: &str, owner: &str) {
        let id = of(key, owner);
        if !self.set.insert(id) {
            return;
        }
        self.order.push_back(id);
        if self.order.len() > REMEMBERED {
            if let Some(oldest) = self.order.pop_front() {
                self.set.remove(&oldest);
            }
        }
    }

    pub(crate) fn contains(&self, key: &str, owner: &str) -> bool {
        self.set.contains(&of(key, owner))
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.order.len()
    }
}

fn of(key: &str, owner: &str) -> u64 {
    let mut hasher = DefaultHasher::new();
    (key, owner).hash(&mut hasher);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_the_last_releases_within_its_bound() {
        let mut released = Released::default();
        released.remember("rlock:{a}", "c:1");
        released.remember("rlock:{a}", "c:1");
        assert!(released.contains("rlock:{a}", "c:1"));
        assert!(!released.contains("rlock:{a}", "c:2"), "another owner");
        assert_eq!(released.len(), 1, "a release remembered once");
        for i in 0..REMEMBERED {
            released.remember(&format!("rlock:{{n{i}}}"), "c:1");
        }
        assert_eq!(released.len(), REMEMBERED);
        assert!(!released.contains("rlock:{a}", "c:1"), "the oldest goes");
        assert!(released.contains(&format!("rlock:{{n{}}}", REMEMBERED - 1), "c:1"));
    }
}
