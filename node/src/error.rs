//! Errors at the edge: every failure becomes the package's own `Error`
//! subclass, built by the JS face (`makeError` in `node/index.js`) from the
//! category the core names. napi would turn an error of an async function into
//! a plain `Error` with `code: 'GenericFailure'`; building the real one here,
//! on the JS thread while the promise settles, keeps each lock operation one
//! native call with no extra promise hop in JS.

use std::future::Future;
use std::sync::Arc;

use napi::bindgen_prelude::{FnArgs, FunctionRef, JsValue, PromiseRaw, ToNapiValue, Unknown};
use napi::JsDeferred;
use napi::{check_status, sys, Env};
use rlock_core::spin::Operation;

/// `makeError(category, message, reason)` from `node/index.js`.
pub type ErrorFactory = FunctionRef<FnArgs<ErrorParts>, Unknown<'static>>;
type ErrorParts = (&'static str, String, Option<&'static str>);

/// What went wrong, as the JS face needs to know it.
#[derive(Debug)]
pub enum Failure {
    /// Any core error; its category picks the JS class.
    Core(rlock_core::Error),
    /// A number out of its range (`ttlMs` ≤ 0, NaN, …): a `RangeError` in JS,
    /// where other bad input is a `TypeError`.
    OutOfRange(rlock_core::Error),
    /// The wait was cancelled through its `AbortSignal`; the JS face rejects
    /// with the signal's own reason instead.
    Aborted,
}

impl From<rlock_core::Error> for Failure {
    fn from(e: rlock_core::Error) -> Self {
        Failure::Core(e)
    }
}

impl Failure {
    /// (category, message, reason) for `makeError`.
    fn parts(self) -> ErrorParts {
        use rlock_core::Error;
        match self {
            Failure::Core(Error::InvalidArgument(m)) => ("bad input", m, None),
            Failure::OutOfRange(Error::InvalidArgument(m)) => ("out of range", m, None),
            Failure::Core(e) | Failure::OutOfRange(e) => {
                let reason = match &e {
                    Error::NotOwned { reason, .. } => Some(reason.as_str()),
                    Error::Lost { reason, .. } => Some(reason.as_str()),
                    _ => None,
                };
                (e.category(), e.to_string(), reason)
            }
            Failure::Aborted => ("aborted", "the wait was aborted".to_owned(), None),
        }
    }
}

/// Builds JS errors through the face's factory.
pub struct Errors(ErrorFactory);

impl Errors {
    pub fn new(factory: ErrorFactory) -> Arc<Self> {
        Arc::new(Errors(factory))
    }

    /// The JS error for `failure`, as a napi error that carries it (napi throws
    /// or rejects with that very object).
    pub fn to_js(&self, env: &Env, failure: Failure) -> napi::Error {
        match self
            .0
            .borrow_back(env)
            .and_then(|make| make.call(failure.parts().into()))
        {
            Ok(error) => napi::Error::from(error),
            Err(e) => e,
        }
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
    /// whenever the loop would sleep (`event_loop.rs`), the runtime's
    /// background thread while JS is busy.
    pub fn promise<'env, T, V, F, C>(
        self: &Arc<Self>,
        env: &'env Env,
        fut: F,
        convert: C,
    ) -> napi::Result<PromiseRaw<'env, V>>
    where
        T: Send + 'static,
        V: ToNapiValue + 'static,
        F: Future<Output = Result<T, Failure>> + Send + 'static,
        C: FnOnce(T) -> V + Send + 'static,
    {
        let driver = crate::driver()?;
        crate::event_loop::install(env);
        let mut fut = Operation::new(fut);
        let finished = crate::event_loop::finished_here();
        let give_way = || crate::event_loop::finished_here() != finished;
        let (deferred, promise) = match driver.block_on_replies(&mut fut, INLINE, give_way) {
            // Done on this thread: settled at once, so `await` goes on in
            // this very turn of the event loop.
            Some(outcome) if crate::event_loop::settle_now(finished) => {
                let outcome = outcome.map(convert).map_err(|f| self.to_js(env, f));
                return settled(env, outcome);
            }
            // Through the loop instead, with its next turn.
            Some(outcome) => {
                let (deferred, promise) = env.create_deferred::<V, Settle<V>>()?;
                self.resolve(deferred, outcome, convert);
                return Ok(PromiseRaw::new(env.raw(), promise.raw()));
            }
            // Waiting on another holder, slow, or giving way to a promise
            // of this thread that is ready: the event loop goes on at once
            // (a holder in this same process may then release meanwhile).
            None => env.create_deferred::<V, Settle<V>>()?,
        };
        let errors = self.clone();
        let pending = crate::event_loop::Pending::start();
        driver.spawn_for_caller(async move {
            errors.resolve(deferred, fut.await, convert);
            drop(pending);
            driver.yield_to_callers();
        });
        Ok(PromiseRaw::new(env.raw(), promise.raw()))
    }

    /// Settles `deferred` with `outcome` on the JS thread, in a turn of its loop.
    fn resolve<T, V>(
        self: &Arc<Self>,
        deferred: JsDeferred<V, Settle<V>>,
        outcome: Result<T, Failure>,
        convert: impl FnOnce(T) -> V + Send + 'static,
    ) where
        T: Send + 'static,
        V: ToNapiValue + 'static,
    {
        let errors = self.clone();
        deferred.resolve(Box::new(move |env: Env| {
            outcome.map(convert).map_err(|f| errors.to_js(&env, f))
        }));
    }
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

/// The longest the JS thread drives an operation awaiting its replies before
/// handing it on: a few loopback round trips, so slow networks never hold
/// the event loop longer than this (a timer's granularity: 1–2 ms).
const INLINE: std::time::Duration = std::time::Duration::from_micros(500);
