//! A runtime for the faces that call the core from threads of their own (a
//! Python thread, Node's JS thread): a current-thread tokio runtime that a
//! calling thread drives itself while it waits, so its request goes out and
//! its reply comes in on its own thread, with no hand-over to a runtime
//! thread and back (two thread wake-ups per operation, more than the round
//! trip itself on a busy machine). When no call has driven it for a moment
//! ([`GRACE`]), or spawned work is waiting, a background thread drives it
//! instead (renewals, release messages, spawned operations), and lets go as
//! soon as a call comes.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::task::Poll;
use std::time::Duration;

use tokio::runtime::Runtime;
use tokio::sync::Notify;

/// How long the runtime may go undriven after a call before the background
/// thread takes over: calls that come back to back keep driving it
/// themselves, and renewals or release messages wait at most about this long.
pub const GRACE: Duration = Duration::from_millis(2);

/// The runtime and who drives it.
pub struct Driver {
    runtime: Runtime,
    /// Calls in progress: while there is one, it drives the runtime.
    callers: AtomicUsize,
    /// Bumped at the start and end of every call: the background thread takes
    /// over only after a [`GRACE`] without any.
    calls: AtomicU64,
    /// Asks the background thread to let go of the runtime.
    let_go: Notify,
    /// The background thread is to let go of the runtime although no call
    /// wants it yet (see [`yield_to_callers`](Self::yield_to_callers)).
    yielding: AtomicBool,
    /// Spawned work not finished yet.
    spawned: Arc<AtomicUsize>,
    /// The background thread is driving the runtime right now.
    background_driving: AtomicBool,
    /// Wakes the background thread to drive at once (work spawned).
    kicked: Mutex<bool>,
    kick: Condvar,
}

impl Driver {
    /// A runtime nobody drives yet: run [`run_background`](Self::run_background)
    /// on a thread of its own once it is where it will stay.
    pub fn new(thread_name: &str) -> std::io::Result<Self> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .thread_name(thread_name)
            .enable_all()
            .build()?;
        Ok(Driver {
            runtime,
            callers: AtomicUsize::new(0),
            calls: AtomicU64::new(0),
            let_go: Notify::new(),
            yielding: AtomicBool::new(false),
            spawned: Arc::default(),
            background_driving: AtomicBool::new(false),
            kicked: Mutex::new(false),
            kick: Condvar::new(),
        })
    }

    /// Runs `fut` to completion, driving the runtime on this thread (or, while
    /// another thread drives it, being woken by that one).
    pub fn block_on<F: Future>(&self, fut: F) -> F::Output {
        self.callers.fetch_add(1, Ordering::AcqRel);
        self.calls.fetch_add(1, Ordering::AcqRel);
        self.let_go.notify_one();
        let _call = Call(self);
        self.runtime
            .block_on(crate::face_support::spin::awake_for_replies(fut))
    }

    /// Drives `op` on this thread (as [`block_on`](Self::block_on)) while it
    /// awaits a reply of its own, for at most `limit`: its output, or `None`
    /// as soon as it waits for anything else (a release by another holder,
    /// often one the calling thread itself is to run next), or `give_way`
    /// says the calling thread has other work ready (a handoff to another
    /// of its callers, heard meanwhile), or the limit passes. The caller then
    /// hands `op` to the runtime ([`spawn_for_caller`](Self::spawn_for_caller)).
    pub fn block_on_replies<F: Future>(
        &self,
        op: &mut crate::face_support::spin::Operation<F>,
        limit: Duration,
        give_way: impl Fn() -> bool,
    ) -> Option<F::Output> {
        self.block_on(async {
            let replies = std::future::poll_fn(|cx| match Pin::new(&mut *op).poll(cx) {
                Poll::Ready(out) => Poll::Ready(Some(out)),
                Poll::Pending if op.awaits_reply() && !give_way() => Poll::Pending,
                Poll::Pending => Poll::Ready(None),
            });
            tokio::time::timeout(limit, replies).await.ok().flatten()
        })
    }

    /// Spawns `fut` and makes sure a thread drives it soon.
    pub fn spawn<F>(&self, fut: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let task = self.spawn_for_caller(fut);
        self.drive_now();
        task
    }

    /// Has the background thread drive the runtime as soon as no call does,
    /// without its grace: for a caller that will not drive it again soon
    /// while spawned work waits (a thread that called in from Go).
    pub fn drive_now(&self) {
        *self.kicked.lock().unwrap_or_else(PoisonError::into_inner) = true;
        self.kick.notify_one();
    }

    /// Spawns `fut` for a caller that will drive the runtime again in a
    /// moment (Node's JS thread going back to its event loop): the background
    /// thread is not woken for it, and takes over only if no call drives the
    /// runtime for a [`GRACE`].
    pub fn spawn_for_caller<F>(&self, fut: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let spawned = self.spawned.clone();
        spawned.fetch_add(1, Ordering::AcqRel);
        let task = self.runtime.spawn(async move {
            let out = fut.await;
            spawned.fetch_sub(1, Ordering::AcqRel);
            out
        });
        // Counted as a call: the background thread's grace starts now.
        self.calls.fetch_add(1, Ordering::AcqRel);
        task
    }

    /// Called by the last spawned work in progress as it hands its result to
    /// a caller that will act on it at once (a JS callback that goes on to
    /// release): the background thread lets go of the runtime, so that the
    /// caller drives it without waiting for it to, and takes it back after a
    /// [`GRACE`] without calls.
    pub fn yield_to_callers(&self) {
        if self.background_driving.load(Ordering::Acquire)
            && self.spawned.load(Ordering::Acquire) <= 1
        {
            self.yielding.store(true, Ordering::Release);
            self.let_go.notify_one();
        }
    }

    pub fn handle(&self) -> &tokio::runtime::Handle {
        self.runtime.handle()
    }

    /// The background thread's loop: drives the runtime whenever no call does.
    pub fn run_background(&self) {
        loop {
            let mut kicked = self.kicked.lock().unwrap_or_else(PoisonError::into_inner);
            loop {
                let seen = self.calls.load(Ordering::Acquire);
                // While a call drives, a kick waits too: it only asks that
                // someone drive, and the call does.
                if !*kicked || self.callers.load(Ordering::Acquire) > 0 {
                    kicked = self
                        .kick
                        .wait_timeout(kicked, GRACE)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0;
                }
                let idle = self.calls.load(Ordering::Acquire) == seen;
                if self.callers.load(Ordering::Acquire) == 0 && (*kicked || idle) {
                    *kicked = false;
                    break;
                }
            }
            drop(kicked);
            // Until a call wants the runtime. A wish left by a call that has
            // ended since (a stored permit) is stale: driving goes on, or
            // the work spawned meanwhile would wait a GRACE undriven.
            self.background_driving.store(true, Ordering::Release);
            loop {
                self.runtime.block_on(self.let_go.notified());
                if self.yielding.swap(false, Ordering::AcqRel)
                    || self.callers.load(Ordering::Acquire) > 0
                {
                    break;
                }
            }
            self.background_driving.store(false, Ordering::Release);
        }
    }
}

/// One call in progress (ended on drop, panics included).
struct Call<'a>(&'a Driver);

impl Drop for Call<'_> {
    fn drop(&mut self) {
        self.0.calls.fetch_add(1, Ordering::AcqRel);
        self.0.callers.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::face_support::spin::{awaited, Operation};
    use std::time::Instant;
    use tokio::sync::oneshot;

    #[test]
    fn a_caller_stays_for_replies_and_leaves_an_operation_waiting_for_another() {
        let driver = Driver::new("rlock-test").unwrap();
        let limit = Duration::from_secs(60);

        // Its reply comes from another thread: the caller stays for it.
        let (reply, replied) = oneshot::channel::<u32>();
        let mut replying = Operation::new(awaited(replied));
        let replier = std::thread::spawn(move || reply.send(7));
        assert_eq!(
            driver.block_on_replies(&mut replying, limit, || false),
            Some(Ok(7))
        );
        replier.join().unwrap().unwrap();

        // Waiting for someone else's release: handed back at once, not at
        // the limit, and it still completes when driven later.
        let (release, released) = oneshot::channel::<u32>();
        let mut waiting = Operation::new(released);
        let started = Instant::now();
        assert_eq!(driver.block_on_replies(&mut waiting, limit, || false), None);
        assert!(started.elapsed() < limit, "held until the limit");
        release.send(3).unwrap();
        assert_eq!(driver.block_on(waiting), Ok(3));

        // Awaiting its reply, but the caller has other work ready: handed
        // back too.
        let (reply, replied) = oneshot::channel::<u32>();
        let mut replying = Operation::new(awaited(replied));
        let started = Instant::now();
        assert_eq!(driver.block_on_replies(&mut replying, limit, || true), None);
        assert!(started.elapsed() < limit, "held until the limit");
        reply.send(9).unwrap();
        assert_eq!(driver.block_on(replying), Ok(9));
    }
}
