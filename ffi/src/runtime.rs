//! The runtime every request runs on: the core's `Driver`, driven by the
//! calling thread while a request awaits replies of its own (for at most
//! [`INLINE`]), by a thread of its own the rest of the time (no caller
//! thread ever waits in this library for another holder), built on first
//! use and kept for the life of the process.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use rlock_core::driver::Driver;
use rlock_core::spin::Operation;

/// The longest a calling thread drives a request awaiting its replies
/// before handing it to the runtime's thread: a few loopback round trips.
const INLINE: Duration = Duration::from_micros(500);

pub(crate) fn get() -> Option<&'static Driver> {
    static DRIVER: OnceLock<Option<&'static Driver>> = OnceLock::new();
    *DRIVER.get_or_init(|| {
        let driver: &'static Driver = Box::leak(Box::new(Driver::new("rlock-runtime").ok()?));
        std::thread::Builder::new()
            .name("rlock-runtime".to_owned())
            .spawn(move || driver.run_background())
            .ok()?;
        Some(driver)
    })
}

/// Runs `fut` on the runtime (started by `rlock_init`).
pub(crate) fn spawn(fut: impl Future<Output = ()> + Send + 'static) {
    if let Some(driver) = get() {
        drop(driver.spawn(fut));
    }
}

/// Runs `fut` on the runtime whenever it is next driven: by a call, or by
/// the runtime's own thread after a moment without calls.
pub(crate) fn spawn_lazily(fut: impl Future<Output = ()> + Send + 'static) {
    if let Some(driver) = get() {
        drop(driver.spawn_for_caller(fut));
    }
}

/// Drives `op` on this thread while it awaits replies of its own, for at
/// most [`INLINE`]: its output, or `None` once it waits for anything else
/// (it is then to be spawned). Never inside the runtime (a request made
/// from a completion called while a thread drives it): `None` there too.
/// A call lets the runtime's own thread go; while requests wait, it is
/// asked to drive again at once as the call ends (nothing else drives it:
/// a release message or a handoff would wait for the next call).
pub(crate) fn inline<F: Future>(op: &mut Operation<F>) -> Option<F::Output> {
    if tokio::runtime::Handle::try_current().is_ok() {
        return None;
    }
    let driver = get()?;
    let out = driver.block_on_replies(op, INLINE, || false);
    if WAITING.load(Ordering::Acquire) > 0 {
        driver.drive_now();
    }
    out
}

/// Requests handed to the runtime, not completed yet.
static WAITING: AtomicUsize = AtomicUsize::new(0);

/// One request handed to the runtime, until dropped.
pub(crate) struct Waiting(());

impl Waiting {
    pub(crate) fn start() -> Self {
        WAITING.fetch_add(1, Ordering::AcqRel);
        Waiting(())
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        WAITING.fetch_sub(1, Ordering::AcqRel);
    }
}
