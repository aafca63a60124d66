//! Handles: the caller holds numbers, never pointers into this library, so
//! a handle used after it was freed, or freed twice, is an error the call
//! reports (or nothing), never memory misread.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use rlock_core::{Client, Lock, Rebuild, Semaphore};

/// The live values of one kind, by handle.
pub(crate) struct Handles<T> {
    live: OnceLock<Mutex<HashMap<u64, T>>>,
}

/// Handles of every kind are drawn from one count, so a client's never
/// names a lock; 0 is never one.
static NEXT: AtomicU64 = AtomicU64::new(1);

impl<T> Handles<T> {
    const fn new() -> Self {
        Handles {
            live: OnceLock::new(),
        }
    }

    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<u64, T>> {
        self.live
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn insert(&self, value: T) -> u64 {
        let handle = NEXT.fetch_add(1, Ordering::Relaxed);
        self.table().insert(handle, value);
        handle
    }

    pub(crate) fn remove(&self, handle: u64) -> Option<T> {
        self.table().remove(&handle)
    }
}

impl<T: Clone> Handles<T> {
    pub(crate) fn get(&self, handle: u64) -> Option<T> {
        self.table().get(&handle).cloned()
    }
}

pub(crate) static CLIENTS: Handles<Client> = Handles::new();
pub(crate) static LOCKS: Handles<LockHandle> = Handles::new();
/// Semaphores, whose locks taking other numbers of permits are made from them.
pub(crate) static SEMAPHORES: Handles<Semaphore> = Handles::new();
/// Rebuilds in progress: each ended once, taken out of the table to end it.
pub(crate) static REBUILDS: Handles<Rebuild> = Handles::new();

/// A lock as its handle holds it: the core's lock, and the gate its
/// acquisitions pass one at a time, each until its outcome is delivered.
/// The core already lets one acquisition of an owner run at a time (its
/// whole wait); the gate extends that to the delivery, so that the caller
/// learns of a fresh acquisition before it learns of a re-entry into it,
/// whichever thread each was finished on (see `requests::start`).
#[derive(Clone)]
pub(crate) struct LockHandle {
    pub(crate) lock: Lock,
    pub(crate) gate: Arc<tokio::sync::Mutex<()>>,
}

impl LockHandle {
    pub(crate) fn new(lock: Lock) -> Self {
        LockHandle {
            lock,
            gate: Arc::default(),
        }
    }
}

impl std::ops::Deref for LockHandle {
    type Target = Lock;

    fn deref(&self) -> &Lock {
        &self.lock
    }
}
