//! The tokio runtime the core runs on, and how Node waits for it: every
//! operation is one JS promise, settled on the JS thread.
//!
//! The runtime is the core's `Driver`: the JS thread drives it while it runs
//! an operation, a background thread the rest of the time. An operation that
//! only awaits its own replies is finished inline, its request and reply
//! handled on the JS thread with no hand-over to another thread and back.
//! Anything longer is handed to the runtime and its promise settles through
//! the event loop, which drives the runtime itself whenever it would
//! otherwise sleep ([`event_loop`]), so the end of a wait (a handoff, above
//! all) costs no thread wake-up either.
//!
//! The order promises settle in is decided here too: one finished inline
//! settles at once only where that keeps the order the loop would have given
//! had every reply come through it (see [`settle_now`]).

mod event_loop;

use std::cell::Cell;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use napi::bindgen_prelude::{JsValue, PromiseRaw, ToNapiValue};
use napi::JsDeferred;
use napi::{check_status, sys, Env};
use rlock_core::driver::Driver;
use rlock_core::spin::Operation;
use tokio::sync::Notify;

use crate::error::{Errors, Failure};

/// The longest the JS thread drives an operation awaiting its replies before
/// handing it on: a few loopback round trips, so slow networks never hold
/// the event loop longer than this (a timer's granularity: 1–2 ms).
const INLINE: Duration = Duration::from_micros(500);

/// How many operations one turn of the loop may settle at once (see
/// [`settle_now`]).
const SETTLES_PER_TURN: u32 = 32;

/// The runtime every operation runs on, built on first use: the JS thread
/// drives it while it runs an operation, a background thread the rest of the
/// time (see `rlock_core::driver`). Leaked: it lives as long as the process,
/// like its thread.
pub fn get() -> napi::Result<&'static Driver> {
    static DRIVER: OnceLock<Result<&'static Driver, String>> = OnceLock::new();
    DRIVER
        .get_or_init(|| {
            let driver: &'static Driver = Box::leak(Box::new(
                Driver::new("rlock-runtime").map_err(|e| e.to_string())?,
            ));
            std::thread::Builder::new()
                .name("rlock-runtime".to_owned())
                .spawn(move || driver.run_background())
                .map_err(|e| e.to_string())?;
            Ok(driver)
        })
        .clone()
        .map_err(|e| napi::Error::from_reason(format!("could not start the rlock runtime: {e}")))
}

/// A promise of `fut`'s outcome, converted on the JS thread; failures
/// reject with the face's errors. The JS thread drives `fut` itself while
/// it awaits its own replies, for up to [`INLINE`] (an operation of one
/// round trip is done by then, its request and reply handled on this
/// thread with no hand-over to another and back). Once it waits for
/// anything else, above all a lock that another holder must release
/// first, or another promise of this thread is ready to settle, or past
/// [`INLINE`], the event loop goes on at once: that holder may be a
/// promise of this very thread, whose release cannot run while this call
/// holds the thread. The JS thread then drives `fut`
/// whenever the loop would sleep ([`event_loop`]), the runtime's
/// background thread while JS is busy.
pub fn promise<'env, T, V, F, C>(
    env: &'env Env,
    errors: &Arc<Errors>,
    fut: F,
    convert: C,
) -> napi::Result<PromiseRaw<'env, V>>
where
    T: Send + 'static,
    V: ToNapiValue + 'static,
    F: Future<Output = Result<T, Failure>> + Send + 'static,
    C: FnOnce(T) -> V + Send + 'static,
{
    let driver = get()?;
    event_loop::install(env);
    let mut fut = Operation::new(fut);
    let finished = finished_here();
    let give_way = || finished_here() != finished;
    let (deferred, promise) = match driver.block_on_replies(&mut fut, INLINE, give_way) {
        // Done on this thread: settled at once, so `await` goes on in
        // this very turn of the event loop.
        Some(outcome) if settle_now(finished) => {
            let outcome = outcome.map(convert).map_err(|f| errors.to_js(env, f));
            return settled(env, outcome);
        }
        // Through the loop instead, with its next turn.
        Some(outcome) => {
            let (deferred, promise) = env.create_deferred::<V, Settle<V>>()?;
            resolve(errors, deferred, outcome, convert);
            return Ok(PromiseRaw::new(env.raw(), promise.raw()));
        }
        // Waiting on another holder, slow, or giving way to a promise
        // of this thread that is ready: the event loop goes on at once
        // (a holder in this same process may then release meanwhile).
        None => env.create_deferred::<V, Settle<V>>()?,
    };
    let errors = errors.clone();
    let pending = Pending::start();
    driver.spawn_for_caller(async move {
        resolve(&errors, deferred, fut.await, convert);
        drop(pending);
        driver.yield_to_callers();
    });
    Ok(PromiseRaw::new(env.raw(), promise.raw()))
}

/// Settles `deferred` with `outcome` on the JS thread, in a turn of its loop.
fn resolve<T, V>(
    errors: &Arc<Errors>,
    deferred: JsDeferred<V, Settle<V>>,
    outcome: Result<T, Failure>,
    convert: impl FnOnce(T) -> V + Send + 'static,
) where
    T: Send + 'static,
    V: ToNapiValue + 'static,
{
    let errors = errors.clone();
    deferred.resolve(Box::new(move |env: Env| {
        outcome.map(convert).map_err(|f| errors.to_js(&env, f))
    }));
}

/// A promise already settled with `outcome`.
fn settled<'env, V: ToNapiValue>(
    env: &'env Env,
    outcome: napi::Result<V>,
) -> napi::Result<PromiseRaw<'env, V>> {
    let raw = env.raw();
    let mut deferred = std::ptr::null_mut();
    let mut promise = std::ptr::null_mut();
    // SAFETY: plain N-API calls on the JS thread, with the env of this call.
    unsafe {
        check_status!(sys::napi_create_promise(raw, &mut deferred, &mut promise))?;
        match outcome.and_then(|v| V::to_napi_value(raw, v)) {
            Ok(value) => check_status!(sys::napi_resolve_deferred(raw, deferred, value))?,
            Err(e) => {
                let error = ToNapiValue::to_napi_value(raw, e)?;
                check_status!(sys::napi_reject_deferred(raw, deferred, error))?
            }
        }
    }
    Ok(PromiseRaw::new(raw, promise))
}

/// Settles a promise on the JS thread.
type Settle<V> = Box<dyn FnOnce(Env) -> napi::Result<V> + Send>;

/// Signalled whenever an operation handed to the runtime settles.
static SETTLED: Notify = Notify::const_new();

thread_local! {
    /// Operations this JS thread handed to the runtime whose promise is not
    /// settled yet: only its own make its loop drive.
    static PENDING: Arc<AtomicUsize> = Arc::default();
    /// Operations settled at once since the loop last turned.
    static SETTLED_THIS_TURN: Cell<u32> = const { Cell::new(0) };
    /// Operations handed to the runtime that finished on this thread (their
    /// promises settle through the loop), counted as they finish.
    static FINISHED_HERE: Cell<u64> = const { Cell::new(0) };
}

/// An operation handed to the runtime; settled when dropped (on any thread).
struct Pending(Arc<AtomicUsize>);

impl Pending {
    fn start() -> Self {
        let count = PENDING.with(Arc::clone);
        count.fetch_add(1, Ordering::AcqRel);
        Pending(count)
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
        FINISHED_HERE.set(FINISHED_HERE.get() + 1);
        SETTLED.notify_waiters();
    }
}

/// How many operations handed to the runtime have finished on this thread so
/// far: when that changes during a call, another promise of this thread is
/// ready to settle (typically a handoff, heard with this call's replies).
fn finished_here() -> u64 {
    FINISHED_HERE.get()
}

/// Whether an operation finished on the JS thread may settle its promise at
/// once (`await` goes on in this very turn), `finished` being
/// [`finished_here`] as its call began. Not when another operation finished
/// meanwhile: that one's promise settles through the loop and must go first,
/// or its holder would wait while this promise's continuation runs (an
/// acquire of its own, say: a whole round trip). Not more than
/// [`SETTLES_PER_TURN`] times per turn of the loop either: a loop of awaited
/// operations (`while (!(await lock.tryAcquire()))`) must still let timers
/// and I/O run, as it would if every reply came through the loop.
fn settle_now(finished: u64) -> bool {
    if finished_here() != finished {
        return false;
    }
    SETTLED_THIS_TURN.with(|n| {
        let now = n.get() < SETTLES_PER_TURN;
        n.set(n.get() + u32::from(now));
        now
    })
}

/// The loop turned: awaited operations may settle at once again.
fn turn_began() {
    SETTLED_THIS_TURN.set(0);
}

/// Operations this JS thread handed to the runtime and not settled yet.
fn pending() -> usize {
    PENDING.with(|p| p.load(Ordering::Acquire))
}
