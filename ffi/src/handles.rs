//! Handles: the caller holds numbers, never pointers into this library, so
//! a handle used after it was freed, or freed twice, is an error the call
//! reports (or nothing), never memory misread.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

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
pub(crate) static LOCKS: Handles<Lock> = Handles::new();
/// Semaphores, whose locks taking other numbers of permits are made from them.
pub(crate) static SEMAPHORES: Handles<Semaphore> = Handles::new();
/// Rebuilds in progress: each ended once, taken out of the table to end it.
pub(crate) static REBUILDS: Handles<Rebuild> = Handles::new();
