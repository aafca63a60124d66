//! Errors at the edge: every failure becomes the package's own `Error`
//! subclass, built by the JS face (`makeError` in `node/index.js`) from the
//! category the core names. napi would turn an error of an async function into
//! a plain `Error` with `code: 'GenericFailure'`; building the real one here,
//! on the JS thread while the promise settles, keeps each lock operation one
//! native call with no extra promise hop in JS.

use std::sync::Arc;

use napi::bindgen_prelude::{FnArgs, FunctionRef, Unknown};
use napi::Env;

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
}
