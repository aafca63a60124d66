//! Requests in flight: started on the runtime, completed once, and the
//! waits among them cancellable by id. A cancelled wait is the core's
//! acquire future dropped, which never leaks a lock (an attempt in flight is
//! given back if it succeeds).

use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use futures_util::FutureExt;
use rlock_core::spin::Operation;
use rlock_core::Error;
use tokio::sync::oneshot;

use crate::completion::{self, Done};
use crate::failure::{RLOCK_CANCELLED, RLOCK_INTERNAL};
use crate::runtime;

/// The cancel switches of the cancellable requests in flight, by id.
fn in_flight() -> &'static Mutex<HashMap<u64, oneshot::Sender<()>>> {
    static IN_FLIGHT: OnceLock<Mutex<HashMap<u64, oneshot::Sender<()>>>> = OnceLock::new();
    IN_FLIGHT.get_or_init(Default::default)
}

/// Runs `work` and completes `token` with its outcome (a panic in it with
/// [`RLOCK_INTERNAL`]). A cancellable request returns its id for
/// [`rlock_cancel`] (never 0); any other 0.
///
/// The calling thread drives `work` itself while it awaits replies of its
/// own (`runtime::inline`): a request of a round trip or two is done before
/// this returns, its completion called on this thread, with no hand-over to
/// the runtime's thread and back (a thread wake-up each way, more than the
/// round trip itself on a busy machine). Work that waits for anything else
/// (a lock held elsewhere) goes on on the runtime.
pub(crate) fn start<F>(token: u64, cancellable: bool, work: F) -> u64
where
    F: Future<Output = Result<Done, Error>> + Send + 'static,
{
    let mut work = Operation::new(AssertUnwindSafe(work).catch_unwind());
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let id = if cancellable {
        NEXT.fetch_add(1, Ordering::Relaxed)
    } else {
        0
    };
    if let Some(outcome) = runtime::inline(&mut work) {
        finish(token, outcome);
        return id;
    }
    if runtime::get().is_none() {
        completion::fail(
            token,
            RLOCK_INTERNAL,
            "rlock: the core's runtime is not running",
        );
        return id;
    }
    let waiting = runtime::Waiting::start();
    if !cancellable {
        runtime::spawn(async move {
            finish(token, work.await);
            drop(waiting);
        });
        return 0;
    }
    let (cancel, cancelled) = oneshot::channel();
    lock(in_flight()).insert(id, cancel);
    runtime::spawn(async move {
        tokio::select! {
            biased;
            outcome = work => {
                lock(in_flight()).remove(&id);
                finish(token, outcome);
            }
            Ok(()) = cancelled => completion::fail(token, RLOCK_CANCELLED, "cancelled"),
        }
        drop(waiting);
    });
    id
}

fn finish(token: u64, outcome: std::thread::Result<Result<Done, Error>>) {
    match outcome {
        Ok(outcome) => completion::complete(token, outcome),
        Err(_) => completion::fail(token, RLOCK_INTERNAL, PANIC_MESSAGE),
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Cancels the request `id` if it is still in flight: it then completes with
/// [`RLOCK_CANCELLED`] (unless its own outcome came first, which it then
/// completes with). An id that already completed, or 0, does nothing.
#[no_mangle]
pub extern "C" fn rlock_cancel(id: u64) {
    let _ = std::panic::catch_unwind(|| {
        if let Some(cancel) = lock(in_flight()).remove(&id) {
            let _ = cancel.send(());
        }
    });
}

/// The id returned by a request whose start panicked: it was completed
/// (with [`RLOCK_INTERNAL`]), and no request has this id to cancel.
pub(crate) const PANICKED: u64 = u64::MAX;

const PANIC_MESSAGE: &str = "rlock: a panic in the core (a bug: please report it)";

/// Runs `f`, an ABI call's body; a panic in it completes `token` with
/// [`RLOCK_INTERNAL`] instead of crossing the boundary, and gives
/// [`PANICKED`]: started and completed, never 0 (which says nothing will
/// complete).
pub(crate) fn guard(token: u64, f: impl FnOnce() -> u64) -> u64 {
    std::panic::catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| {
        completion::fail(token, RLOCK_INTERNAL, PANIC_MESSAGE);
        PANICKED
    })
}

/// Runs `fut`, a task owed to `token`, on the runtime whenever it is next
/// driven (a watch: nothing to do at once); a panic in it completes `token`
/// with [`RLOCK_INTERNAL`].
pub(crate) fn spawn_guarded(token: u64, fut: impl Future<Output = ()> + Send + 'static) {
    runtime::spawn_lazily(async move {
        if AssertUnwindSafe(fut).catch_unwind().await.is_err() {
            completion::fail(token, RLOCK_INTERNAL, PANIC_MESSAGE);
        }
    });
}
