//! The tokio runtime the core runs on, and the two ways Python waits for it:
//! a blocking wait with the GIL released, and an asyncio awaitable.
//!
//! The runtime is a current-thread one, and a calling thread drives it itself
//! while it waits: its request goes out and its reply comes in on its own
//! thread, with no hand-over to a runtime thread and back (two thread wake-ups
//! per operation, more than the round trip itself on a busy machine). When no
//! call has driven it for a moment (`rlock_core::driver::GRACE`), or asyncio work is waiting, a
//! background thread drives it instead (renewals, release messages, asyncio
//! operations), and lets go as soon as a call comes.
//!
//! A tokio runtime does not survive `fork()`: its threads do not exist in the
//! child, and its I/O driver shares the parent's epoll instance. So the
//! runtime sits behind an atomic pointer that a `pthread_atfork` child handler
//! clears; the child builds a fresh one on first use. The parent's runtime is
//! leaked in the child, never dropped: dropping it would wait for threads that
//! are gone, and deregistering its sockets would edit the parent's epoll set.

use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::Once;
use std::time::Duration;

use futures_util::FutureExt;
use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use pyo3_async_runtimes::generic::{self, ContextExt, JoinError};
use pyo3_async_runtimes::TaskLocals;

use crate::error::{Failure, Reply};

/// How long a blocking wait runs before it looks for pending signals: keeps
/// Ctrl-C answered within about 100 ms.
const SLICE: Duration = Duration::from_millis(50);

static RUNTIME: AtomicPtr<Driver> = AtomicPtr::new(ptr::null_mut());
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// Counts forks of this process: anything built in an earlier generation
/// belongs to the parent and must be neither used nor dropped here.
pub fn generation() -> u64 {
    GENERATION.load(Ordering::Acquire)
}

extern "C" fn forked_child() {
    // Only atomics here: the child has one thread and the parent's locks may
    // be held by threads that no longer exist.
    RUNTIME.store(ptr::null_mut(), Ordering::Release);
    GENERATION.fetch_add(1, Ordering::AcqRel);
}

pub fn install_fork_handler() -> PyResult<()> {
    static ONCE: Once = Once::new();
    let mut rc = 0;
    // SAFETY: registers a handler that only touches atomics.
    ONCE.call_once(|| rc = unsafe { libc::pthread_atfork(None, None, Some(forked_child)) });
    if rc != 0 {
        return Err(PyOSError::new_err(format!(
            "pthread_atfork failed with error {rc}"
        )));
    }
    Ok(())
}

pub use rlock_core::driver::Driver;

/// This process' runtime, built on first use (again in a forked child).
pub fn get() -> PyResult<&'static Driver> {
    let current = RUNTIME.load(Ordering::Acquire);
    if !current.is_null() {
        // SAFETY: a published runtime is never freed (leaked across forks).
        return Ok(unsafe { &*current });
    }
    let built = Driver::new("rlock-runtime")
        .map_err(|e| PyOSError::new_err(format!("could not start the rlock runtime: {e}")))?;
    let fresh = Box::into_raw(Box::new(built));
    match RUNTIME.compare_exchange(ptr::null_mut(), fresh, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => {
            // SAFETY: just published; never freed from now on.
            let driver: &'static Driver = unsafe { &*fresh };
            std::thread::Builder::new()
                .name("rlock-runtime".to_owned())
                .spawn(move || driver.run_background())
                .map_err(|e| {
                    PyOSError::new_err(format!("could not start the rlock runtime: {e}"))
                })?;
            Ok(driver)
        }
        Err(winner) => {
            // Another thread published first; ours never ran anything.
            // SAFETY: `fresh` came from Box::into_raw above and was not shared.
            drop(unsafe { Box::from_raw(fresh) });
            // SAFETY: as for `current`.
            Ok(unsafe { &*winner })
        }
    }
}

/// Runs `fut` on the calling thread with the GIL released, waking every
/// [`SLICE`] to run Python's signal handlers: Ctrl-C raises here and drops the
/// future (the core releases an acquisition that completes after that). For
/// waits that may last (acquire).
pub fn wait_interruptible<T: Send>(
    py: Python<'_>,
    fut: impl Future<Output = rlock_core::Result<T>> + Send,
) -> PyResult<T> {
    drive(py, fut, true)
}

/// Runs `fut` on the calling thread with the GIL released, to completion:
/// for short operations that must not stop halfway (release, extend, queries),
/// so a Ctrl-C arriving meanwhile is raised once they are done.
pub fn wait<T: Send>(
    py: Python<'_>,
    fut: impl Future<Output = rlock_core::Result<T>> + Send,
) -> PyResult<T> {
    drive(py, fut, false)
}

/// Drives `fut` in slices of [`SLICE`], looking for signals between slices
/// when `interruptible`. Every wait is sliced: the runtime's timer then
/// always has a deadline that close, so arming the next slice never has to
/// wake the runtime's driver (a write to its eventfd and one more epoll_wait
/// per call).
fn drive<T: Send>(
    py: Python<'_>,
    fut: impl Future<Output = rlock_core::Result<T>> + Send,
    interruptible: bool,
) -> PyResult<T> {
    let rt = get()?;
    // Boxed once: the core's futures are large, and each level of block_on
    // would copy them again.
    let mut fut = Box::pin(fut);
    loop {
        let slice = py.detach(|| {
            catch_panic(|| rt.block_on(async { tokio::time::timeout(SLICE, fut.as_mut()).await }))
        });
        match slice {
            Ok(Ok(out)) => return out.map_err(|e| Failure::Core(e).into_py(py)),
            Ok(Err(_elapsed)) if interruptible => py.check_signals()?,
            Ok(Err(_elapsed)) => {}
            Err(panic) => return Err(panic.into_py(py)),
        }
    }
}

/// An asyncio awaitable of `fut`. Cancelling the awaiting task drops `fut`
/// (for acquire: the wait stops and nothing is left held). Needs a running
/// event loop, so the Python face calls it from `async def` methods.
pub fn awaitable<'py, T>(
    py: Python<'py>,
    fut: impl Future<Output = rlock_core::Result<T>> + Send + 'static,
) -> PyResult<Bound<'py, PyAny>>
where
    T: for<'a> IntoPyObject<'a> + Send + 'static,
{
    get()?;
    generic::future_into_py::<Tokio, _, _>(py, async move {
        let out = AssertUnwindSafe(fut).catch_unwind().await;
        Ok(Reply(match out {
            Ok(r) => r.map_err(Failure::Core),
            Err(panic) => Err(Failure::panic(&*panic)),
        }))
    })
}

/// An asyncio awaitable of `fut` run as its own task: cancelling the awaiting
/// Python task stops the wait for it, never the operation (a release or
/// extend is never cut in half).
pub fn awaitable_task<'py, T>(
    py: Python<'py>,
    fut: impl Future<Output = rlock_core::Result<T>> + Send + 'static,
) -> PyResult<Bound<'py, PyAny>>
where
    T: for<'a> IntoPyObject<'a> + Send + 'static,
{
    let task = get()?.spawn(fut);
    awaitable(py, async move {
        match task.await {
            Ok(out) => out,
            // Raised again here, for `awaitable` to report like its own.
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => Err(rlock_core::Error::Connection(
                "the runtime stopped before the operation finished".to_owned(),
            )),
        }
    })
}

/// Bridge jobs running now: each may hold or wait for the GIL.
static BRIDGING: AtomicUsize = AtomicUsize::new(0);
/// Set at interpreter exit: no bridge job may take the GIL from then on.
static CLOSING: AtomicBool = AtomicBool::new(false);

struct Bridging;

impl Bridging {
    fn enter() -> Self {
        BRIDGING.fetch_add(1, Ordering::SeqCst);
        Bridging
    }
}

impl Drop for Bridging {
    fn drop(&mut self) {
        BRIDGING.fetch_sub(1, Ordering::SeqCst);
    }
}

/// At exit (see `before_exit` in lib.rs): a runtime thread must not touch
/// the GIL once the interpreter finalizes (CPython kills a thread that tries,
/// which is fatal for a Rust thread). An awaited result can be handed over
/// just before the program ends, by a job still inside the GIL (its wake-up
/// write to the event loop releases the GIL for a moment); so stop new jobs,
/// and let the running ones finish, with the GIL released and a bound on the
/// wait.
pub fn stop_bridging(py: Python<'_>) {
    CLOSING.store(true, Ordering::SeqCst);
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    py.detach(|| {
        while BRIDGING.load(Ordering::SeqCst) > 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
    });
}

/// Runs `f` with the GIL on a thread of this module's own (the log
/// forwarder), unless the interpreter is exiting: then `None`.
pub fn with_python<R>(f: impl FnOnce(Python<'_>) -> R) -> Option<R> {
    let _counted = Bridging::enter();
    if CLOSING.load(Ordering::SeqCst) {
        return None;
    }
    Some(Python::attach(f))
}

fn catch_panic<R>(f: impl FnOnce() -> R) -> Result<R, Failure> {
    std::panic::catch_unwind(AssertUnwindSafe(f)).map_err(|p| Failure::panic(&*p))
}

/// pyo3-async-runtimes' generic bridge, over this module's runtime.
struct Tokio;

tokio::task_local! {
    static TASK_LOCALS: std::cell::OnceCell<TaskLocals>;
}

struct TaskError(tokio::task::JoinError);

impl JoinError for TaskError {
    fn is_panic(&self) -> bool {
        self.0.is_panic()
    }

    fn into_panic(self) -> Box<dyn Any + Send + 'static> {
        self.0.into_panic()
    }
}

type TaskHandle = Pin<Box<dyn Future<Output = Result<(), TaskError>> + Send>>;

/// The runtime for the bridge's own spawns. Every entry point above built it
/// already (`get()?`), so this finds it; the fallback only matters if building
/// a runtime fails right after a fork, and then the bridge reports that.
fn handle() -> tokio::runtime::Handle {
    match get() {
        Ok(rt) => rt.handle().clone(),
        Err(_) => tokio::runtime::Handle::current(),
    }
}

impl generic::Runtime for Tokio {
    type JoinError = TaskError;
    type JoinHandle = TaskHandle;

    fn spawn<F>(fut: F) -> Self::JoinHandle
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let task = match get() {
            Ok(driver) => driver.spawn(fut),
            Err(_) => tokio::runtime::Handle::current().spawn(fut),
        };
        Box::pin(async move { task.await.map_err(TaskError) })
    }

    /// The bridge hands results to Python from these jobs (they take the GIL).
    fn spawn_blocking<F>(f: F) -> Self::JoinHandle
    where
        F: FnOnce() + Send + 'static,
    {
        let task = handle().spawn_blocking(move || {
            let _counted = Bridging::enter();
            if !CLOSING.load(Ordering::SeqCst) {
                f();
            }
        });
        Box::pin(async move { task.await.map_err(TaskError) })
    }
}

impl ContextExt for Tokio {
    fn scope<F, R>(locals: TaskLocals, fut: F) -> Pin<Box<dyn Future<Output = R> + Send>>
    where
        F: Future<Output = R> + Send + 'static,
    {
        let cell = std::cell::OnceCell::new();
        let _ = cell.set(locals);
        Box::pin(TASK_LOCALS.scope(cell, fut))
    }

    fn get_task_locals() -> Option<TaskLocals> {
        TASK_LOCALS
            .try_with(|c| c.get().cloned())
            .unwrap_or_default()
    }
}
