//! Errors at the edge: every failure becomes the package's own `Error`
//! subclass, built by the JS face (`makeError` in `node/error.js`) from the
//! category the core names. napi would turn an error of an async function into
//! a plain `Error` with `code: 'GenericFailure'`; building the real one here,
//! on the JS thread while the promise settles, keeps each lock operation one
//! native call with no extra promise hop in JS.

use std::sync::Arc;

use napi::bindgen_prelude::{FnArgs, FunctionRef, Unknown};
use napi::Env;
use rlock_core::OptionName;

use crate::spelling::option_name;

/// `makeError(category, message, detail)` from `node/error.js`.
pub type ErrorFactory = FunctionRef<FnArgs<ErrorParts>, Unknown<'static>>;
/// The detail is the reason of a "not owner" or "lost" error, the cache key
/// of a "loader" one.
type ErrorParts = (&'static str, String, Option<String>);

/// What went wrong, as the JS face needs to know it.
#[derive(Debug)]
pub enum Failure {
    /// Any core error; its category picks the JS class.
    Core(rlock_core::Error),
    /// An option of another type than its own (the core is only ever handed
    /// the right ones): a `TypeError` naming it.
    WrongType {
        option: OptionName,
        expected: &'static str,
        /// What `typeof` says the value given is (never the value: messages
        /// never echo what the caller passed).
        got: &'static str,
    },
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
    /// (category, message, detail) for `makeError`.
    fn parts(self) -> ErrorParts {
        use rlock_core::Error;
        match self {
            // A value out of its option's range (`ttlMs` ≤ 0, NaN, …) is a
            // `RangeError`; any other bad input a `TypeError`.
            Failure::Core(Error::InvalidArgument(invalid)) => {
                let category = match invalid.option {
                    Some(_) => "out of range",
                    None => "bad input",
                };
                (category, js_numbers(&invalid.spelled(option_name)), None)
            }
            Failure::WrongType {
                option,
                expected,
                got,
            } => {
                let message = format!("{} must be {expected}, got {got}", option_name(option));
                ("bad input", message, None)
            }
            Failure::Core(e) => {
                let detail = match &e {
                    Error::NotOwned { reason, .. } => Some(reason.as_str().to_owned()),
                    Error::Lost { reason, .. } => Some(reason.as_str().to_owned()),
                    Error::LoaderFailed { key, .. } => Some(key.clone()),
                    _ => None,
                };
                (e.category(), e.to_string(), detail)
            }
            Failure::Aborted => ("aborted", "the wait was aborted".to_owned(), None),
        }
    }
}

/// `text` with an infinite number spelled as JavaScript spells it
/// (`Infinity`), not as the core's Rust does (`inf`): `ttlMs must be a
/// finite number above 0, got Infinity`.
fn js_numbers(text: &str) -> String {
    text.split(' ')
        .map(|word| {
            let number = word.trim_end_matches([',', ':', ';', ')']);
            let js = match number {
                "inf" => "Infinity",
                "-inf" => "-Infinity",
                _ => return word.to_owned(),
            };
            format!("{js}{}", &word[number.len()..])
        })
        .collect::<Vec<_>>()
        .join(" ")
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
