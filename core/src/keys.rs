//! The one place that builds the Redis keys of a lock (see the wire protocol in
//! docs/protocol.md). The braces put every key of one lock in one Cluster slot.

use std::collections::HashMap;
use std::sync::OnceLock;

use redis::cluster_routing::Slot;

/// The hash slots of Redis Cluster; every deployment counts fencing tokens
/// per slot, so that the protocol is one.
const SLOTS: usize = 16_384;

/// Which kind of lock a set of keys belongs to: each kind has its own keys
/// under a name (a mutex, a read-write lock and a semaphore of one name are
/// three locks), and its own scripts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    Mutex,
    RwLock,
    Semaphore,
    /// The mutex that lets one caller at a time rebuild a cache entry (see
    /// [`CacheKeys`]): the mutex's scripts on keys of its own, so a lock and
    /// a cache entry of one name never wait on each other.
    Rebuild,
}

impl Family {
    /// Several holders share it, each under its own lease (`core/lua/many/`).
    pub fn is_many_holder(self) -> bool {
        matches!(self, Family::RwLock | Family::Semaphore)
    }
}

/// The keys and channels of one lock name under one prefix.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Keys {
    pub family: Family,
    /// The mutex's `P:{NAME}`: the hash holding owner, count and fence; its
    /// PEXPIRE is the lease. A read-write lock's `P:{NAME}:rwlock` and a
    /// semaphore's `P:{NAME}:semaphore`: the hash of their holdings (see
    /// `core/lua/many/lib.lua`).
    pub lock: String,
    /// `B:until` of a read-write lock or semaphore: when each holding's lease
    /// ends (unused by the mutex).
    pub until: String,
    /// `P:fence{T}`: the fencing counter of the Cluster slot `P:{NAME}` hashes
    /// to, INCR per fresh acquisition of any name of that slot. One counter
    /// per slot rather than per name: released names leave no key behind.
    pub fence: String,
    /// `P:{NAME}:fence`: the per-name counter of earlier builds. The scripts
    /// that issue a token fold it into `fence` (raise that to it, then DEL
    /// it), so tokens keep growing on a Redis those builds used.
    pub legacy_fence: String,
    /// `P:{NAME}:forced`: the holding an operator's forced release freed
    /// (see `core/lua/mutex/release.lua`).
    pub forced: String,
    /// `P:{NAME}:released`: the pub/sub channel announcing full releases.
    pub channel: String,
    /// `P:{NAME}:queue`: fair mode's waiting line (owner ids in arrival order).
    pub queue: String,
    /// `P:{NAME}:leases`: the lease each waiter in line asked for.
    pub leases: String,
    /// `P:{NAME}:w:`: prefix of the waiter channels, one per client id; a fair
    /// waiter is alive while its client is subscribed to its channel.
    pub waiter_prefix: String,
}

impl Keys {
    /// Builds a mutex's keys; `name` and `prefix` must already be validated.
    pub fn new(prefix: &str, name: &str) -> Self {
        Self::of(Family::Mutex, prefix, name)
    }

    /// Builds the keys of a lock of `family`.
    pub fn of(family: Family, prefix: &str, name: &str) -> Self {
        let lock = match family {
            Family::Mutex => format!("{prefix}:{{{name}}}"),
            Family::RwLock => format!("{prefix}:{{{name}}}:rwlock"),
            Family::Semaphore => format!("{prefix}:{{{name}}}:semaphore"),
            Family::Rebuild => format!("{prefix}:{{{name}}}:rebuild"),
        };
        Keys {
            family,
            until: format!("{lock}:until"),
            // No `:` before the brace: a lock key is always `PREFIX:{...`, so
            // no lock of any other prefix (`P:fence`, say) has this key.
            fence: format!("{prefix}:fence{{{}}}", slot_tag(Slot::for_key(&lock))),
            legacy_fence: format!("{lock}:fence"),
            forced: format!("{lock}:forced"),
            channel: format!("{lock}:released"),
            queue: format!("{lock}:queue"),
            leases: format!("{lock}:leases"),
            waiter_prefix: format!("{lock}:w:"),
            lock,
        }
    }

    /// The waiter channel of one client.
    pub fn waiter_channel(&self, client_id: &str) -> String {
        format!("{}{client_id}", self.waiter_prefix)
    }
}

/// `P:client:{ID}`: the registration of the client `id` (see
/// `core/lua/client/register.lua`), in a slot of its own per client. No lock key starts
/// so: a lock's is `P:{NAME}`.
pub fn client_key(prefix: &str, id: &str) -> String {
    format!("{prefix}:client:{{{id}}}")
}

/// The keys of one cache entry under one prefix (see `core/lua/cache/lib.lua`
/// and docs/protocol.md), all in the slot of `{KEY}`, so that one script
/// reads or writes the entry, its rebuild lock and its failure together on
/// Redis Cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheKeys {
    /// `P:{KEY}:cached`: the entry (a hash); its PEXPIRE ends its stale
    /// window.
    pub entry: String,
    /// `P:{KEY}:cached:failed`: the last failed rebuild, "<token> <message>",
    /// kept while the callers waiting for that rebuild may still read it.
    pub failed: String,
    /// `P:{KEY}:cached:news`: the pub/sub channel announcing a rebuild's end
    /// (`written <token>`, `failed <token>`) to the callers waiting for it.
    pub news: String,
    /// The rebuild lock: a mutex's keys under [`Family::Rebuild`].
    pub rebuild: Keys,
}

impl CacheKeys {
    /// Builds the keys of the cache entry `key`; `key` and `prefix` must
    /// already be validated.
    pub fn new(prefix: &str, key: &str) -> Self {
        let entry = format!("{prefix}:{{{key}}}:cached");
        CacheKeys {
            failed: format!("{entry}:failed"),
            news: format!("{entry}:news"),
            entry,
            rebuild: Keys::of(Family::Rebuild, prefix, key),
        }
    }

    /// The keys of the entry whose rebuild lock is `rebuild`, when it is one.
    pub fn of_rebuild(rebuild: &Keys) -> Option<Self> {
        if rebuild.family != Family::Rebuild {
            return None;
        }
        let entry = format!("{}:cached", rebuild.lock.strip_suffix(":rebuild")?);
        Some(CacheKeys {
            failed: format!("{entry}:failed"),
            news: format!("{entry}:news"),
            entry,
            rebuild: rebuild.clone(),
        })
    }
}

/// The hash tag of a slot's fence counter: the smallest whole number that
/// hashes to that slot, in decimal (a rule any client can follow). The table
/// is built once, on the first lock a process names; the largest tag is
/// 109757.
fn slot_tag(slot: Slot) -> u32 {
    static TAGS: OnceLock<HashMap<Slot, u32>> = OnceLock::new();
    let tags = TAGS.get_or_init(|| {
        let mut tags = HashMap::with_capacity(SLOTS);
        let mut n = 0u32;
        while tags.len() < SLOTS {
            tags.entry(Slot::for_key(n.to_string())).or_insert(n);
            n += 1;
        }
        tags
    });
    tags[&slot]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rebuild_lock_names_its_entry_and_no_other_lock_does() {
        let entry = CacheKeys::new("app", "report:{7}:x");
        assert_eq!(CacheKeys::of_rebuild(&entry.rebuild), Some(entry));
        assert_eq!(
            CacheKeys::of_rebuild(&Keys::new("app", "report:rebuild")),
            None
        );
    }

    #[test]
    fn keys_follow_the_wire_protocol() {
        let k = Keys::new("rlock", "product:1001");
        assert_eq!(k.lock, "rlock:{product:1001}");
        // product:1001 is in slot 181, and 47183 the first number that is.
        assert_eq!(k.fence, "rlock:fence{47183}");
        assert_eq!(k.legacy_fence, "rlock:{product:1001}:fence");
        assert_eq!(k.channel, "rlock:{product:1001}:released");
        assert_eq!(k.queue, "rlock:{product:1001}:queue");
        assert_eq!(k.leases, "rlock:{product:1001}:leases");
        assert_eq!(k.waiter_channel("c1"), "rlock:{product:1001}:w:c1");
        let c = CacheKeys::new("rlock", "product:1001");
        assert_eq!(c.entry, "rlock:{product:1001}:cached");
        assert_eq!(c.failed, "rlock:{product:1001}:cached:failed");
        assert_eq!(c.news, "rlock:{product:1001}:cached:news");
        assert_eq!(c.rebuild.lock, "rlock:{product:1001}:rebuild");
        assert_eq!(c.rebuild.fence, k.fence);
        let rw = Keys::of(Family::RwLock, "rlock", "cfg");
        assert_eq!(rw.lock, "rlock:{cfg}:rwlock");
        assert_eq!(rw.until, "rlock:{cfg}:rwlock:until");
        assert_eq!(rw.queue, "rlock:{cfg}:rwlock:queue");
        assert_eq!(rw.waiter_channel("c1"), "rlock:{cfg}:rwlock:w:c1");
        let sem = Keys::of(Family::Semaphore, "rlock", "jobs");
        assert_eq!(sem.lock, "rlock:{jobs}:semaphore");
        assert_eq!(sem.leases, "rlock:{jobs}:semaphore:leases");
        assert_eq!(sem.fence, Keys::new("rlock", "jobs").fence);
    }

    #[test]
    fn the_fence_counter_shares_the_slot_of_the_lock_and_of_no_other_slot() {
        for name in ["product:1001", "a}b", "odd", "ü", "x{y}"] {
            let k = Keys::new("app", name);
            assert_eq!(Slot::for_key(&k.fence), Slot::for_key(&k.lock), "{name}");
            assert_eq!(
                Slot::for_key(&k.legacy_fence),
                Slot::for_key(&k.lock),
                "{name}"
            );
        }
        // Names of one slot share one counter; of two slots, two.
        assert_eq!(Keys::new("app", "a}b").fence, Keys::new("app", "a}c").fence);
        assert_ne!(Keys::new("app", "a").fence, Keys::new("app", "b").fence);
    }

    #[test]
    fn every_slot_has_the_smallest_tag_that_hashes_to_it() {
        for slot in (0..SLOTS as u16).filter_map(Slot::new) {
            assert_eq!(Slot::for_key(slot_tag(slot).to_string()), slot);
        }
        // No number below a tag hashes to that tag's slot.
        for n in 0..=109_757u32 {
            assert!(slot_tag(Slot::for_key(n.to_string())) <= n, "{n}");
        }
    }
}
