//! `RwLock` in the JS face: its two sides are each a JS `Lock` over a core
//! `Lock` of one owner, so each waits, renews and reports a loss as the
//! mutex does; the core decides who may hold.

use std::sync::Arc;

use napi_derive::napi;
use rlock_core::{RwLock, Wait};

use crate::error::Errors;
use crate::lock::NativeLock;

/// The two sides of one owner's read-write lock.
#[napi(object, object_from_js = false)]
pub struct NativeRwLock {
    pub read: NativeLock,
    pub write: NativeLock,
}

impl NativeRwLock {
    pub(crate) fn new(rw: RwLock, wait: Wait, errors: &Arc<Errors>) -> Self {
        NativeRwLock {
            read: NativeLock::new(rw.read().clone(), wait, errors.clone()),
            write: NativeLock::new(rw.write().clone(), wait, errors.clone()),
        }
    }
}
