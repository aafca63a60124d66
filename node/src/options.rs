//! The options of `client.lock()` (and so of `client.using()`), declared once
//! for the JS face: read from the object JS passes, each checked for its type
//! here, then handed to the core, which checks their values.

use napi::bindgen_prelude::FromNapiValue;
use napi::{check_status, sys};
use napi_derive::napi;
use rlock_core::{LockArgs, Opt, Unit};

use crate::error::Failure;

/// `LockOptions` of `node/index.d.ts`: times in milliseconds.
#[napi(object, object_to_js = false)]
pub struct LockOptions {
    #[napi(ts_type = "number")]
    pub ttl_ms: Option<Given<f64>>,
    #[napi(ts_type = "number")]
    pub timeout_ms: Option<Given<f64>>,
    #[napi(ts_type = "boolean")]
    pub auto_renew: Option<Given<bool>>,
    #[napi(ts_type = "number")]
    pub max_hold_ms: Option<Given<f64>>,
    #[napi(ts_type = "number")]
    pub sync_replicas: Option<Given<f64>>,
    #[napi(ts_type = "boolean")]
    pub fair: Option<Given<bool>>,
    #[napi(ts_type = "number")]
    pub queue_after_ms: Option<Given<f64>>,
}

impl LockOptions {
    /// The options as the core's raw arguments, once each is of its type.
    pub fn args(self) -> Result<LockArgs, Failure> {
        let defaults = LockArgs::new(Unit::Millis);
        Ok(LockArgs {
            ttl: number(Opt::Ttl, self.ttl_ms)?,
            timeout: number(Opt::Timeout, self.timeout_ms)?,
            auto_renew: flag(Opt::AutoRenew, self.auto_renew)?.unwrap_or(defaults.auto_renew),
            max_hold: number(Opt::MaxHold, self.max_hold_ms)?,
            sync_replicas: number(Opt::SyncReplicas, self.sync_replicas)?,
            fair: flag(Opt::Fair, self.fair)?.unwrap_or(defaults.fair),
            queue_after: number(Opt::QueueAfter, self.queue_after_ms)?,
            ..defaults
        })
    }
}

/// An option as JS gave it: a value of its type, or else what `typeof` calls
/// the value given instead. napi's own conversion would throw a plain `Error`
/// for a wrong type; this way it becomes the face's `TypeError` with code
/// `ERR_INVALID_ARG`, naming the option, like every other bad argument.
pub struct Given<T>(Result<T, &'static str>);

impl FromNapiValue for Given<f64> {
    unsafe fn from_napi_value(env: sys::napi_env, value: sys::napi_value) -> napi::Result<Self> {
        given(env, value, sys::ValueType::napi_number)
    }
}

impl FromNapiValue for Given<bool> {
    unsafe fn from_napi_value(env: sys::napi_env, value: sys::napi_value) -> napi::Result<Self> {
        given(env, value, sys::ValueType::napi_boolean)
    }
}

/// # Safety
///
/// `env` and `value` are the live handles napi passes to `from_napi_value`.
unsafe fn given<T: FromNapiValue>(
    env: sys::napi_env,
    value: sys::napi_value,
    expected: i32,
) -> napi::Result<Given<T>> {
    let mut kind = 0;
    check_status!(unsafe { sys::napi_typeof(env, value, &mut kind) })?;
    if kind == expected {
        return Ok(Given(Ok(unsafe { T::from_napi_value(env, value) }?)));
    }
    use sys::ValueType as V;
    let type_of = match kind {
        V::napi_undefined => "undefined",
        V::napi_null => "null",
        V::napi_boolean => "boolean",
        V::napi_number => "number",
        V::napi_string => "string",
        V::napi_symbol => "symbol",
        V::napi_function => "function",
        V::napi_object | V::napi_external => "object",
        // The one type left, which napi names only from N-API 6 on.
        _ => "bigint",
    };
    Ok(Given(Err(type_of)))
}

/// A number option: unset when absent (`null` is a wrong type).
fn number(option: Opt, given: Option<Given<f64>>) -> Result<Option<f64>, Failure> {
    match given {
        None => Ok(None),
        Some(Given(Ok(n))) => Ok(Some(n)),
        Some(Given(Err(got))) => Err(Failure::WrongType {
            option,
            expected: "a number",
            got,
        }),
    }
}

/// A boolean option: unset when absent or `null` (as `??` reads it).
fn flag(option: Opt, given: Option<Given<bool>>) -> Result<Option<bool>, Failure> {
    match given {
        None | Some(Given(Err("null"))) => Ok(None),
        Some(Given(Ok(b))) => Ok(Some(b)),
        Some(Given(Err(got))) => Err(Failure::WrongType {
            option,
            expected: "a boolean",
            got,
        }),
    }
}
