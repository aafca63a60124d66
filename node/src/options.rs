//! The options of `client.lock()` (and so of `client.using()`) and of
//! `client.cached()`, declared once for the JS face: read from the object JS
//! passes, each checked for its type here, then handed to the core, which
//! checks their values. The JS face refuses keys these declarations do not
//! have (`lockOptionNames`, `cacheOptionNames`).

use napi::bindgen_prelude::FromNapiValue;
use napi::{check_status, sys};
use napi_derive::napi;
use rlock_core::{CacheArgs, JobArgs, LockArgs, OptionName, Unit};

use crate::error::Failure;

/// Declares an options struct together with `FIELDS`, its field names, so
/// the keys a caller may pass are the struct's own fields and never a list
/// kept beside it. Every field is optional; `Option` is spelled out here as
/// napi tells optional fields by that word.
macro_rules! options_struct {
    (
        $(#[$attr:meta])*
        pub struct $name:ident {
            $( $(#[$field_attr:meta])* pub $field:ident: Option<$ty:ty>, )*
        }
    ) => {
        $(#[$attr])*
        pub struct $name {
            $( $(#[$field_attr])* pub $field: Option<$ty>, )*
        }

        impl $name {
            const FIELDS: &'static [&'static str] = &[$(stringify!($field)),*];
        }
    };
}

options_struct! {
    /// `LockOptions` of `node/index.d.ts`: times in milliseconds.
    #[napi(object, object_to_js = false)]
    pub struct LockOptions {
        #[napi(ts_type = "number")]
        pub ttl_ms: Option<TypeChecked<f64>>,
        #[napi(ts_type = "number")]
        pub timeout_ms: Option<TypeChecked<f64>>,
        #[napi(ts_type = "boolean")]
        pub auto_renew: Option<TypeChecked<bool>>,
        #[napi(ts_type = "number")]
        pub max_hold_ms: Option<TypeChecked<f64>>,
        #[napi(ts_type = "number")]
        pub sync_replicas: Option<TypeChecked<f64>>,
        #[napi(ts_type = "boolean")]
        pub fair: Option<TypeChecked<bool>>,
        #[napi(ts_type = "number")]
        pub queue_after_ms: Option<TypeChecked<f64>>,
        #[napi(ts_type = "boolean")]
        pub allow_long_ttl: Option<TypeChecked<bool>>,
    }
}

options_struct! {
    /// `CacheOptions` of `node/index.d.ts`: times in milliseconds.
    #[napi(object, object_to_js = false)]
    pub struct CacheOptions {
        #[napi(ts_type = "number")]
        pub ttl_ms: Option<TypeChecked<f64>>,
        #[napi(ts_type = "number")]
        pub stale_ms: Option<TypeChecked<f64>>,
        #[napi(ts_type = "number")]
        pub none_ttl_ms: Option<TypeChecked<f64>>,
        #[napi(ts_type = "number")]
        pub jitter: Option<TypeChecked<f64>>,
        #[napi(ts_type = "number")]
        pub early: Option<TypeChecked<f64>>,
        #[napi(ts_type = "number")]
        pub timeout_ms: Option<TypeChecked<f64>>,
        #[napi(ts_type = "'share' | 'retry'")]
        pub on_error: Option<TypeChecked<String>>,
        #[napi(ts_type = "number")]
        pub lock_ttl_ms: Option<TypeChecked<f64>>,
    }
}

options_struct! {
    /// `JobOptions` of `node/index.d.ts` (a run-once job): times in
    /// milliseconds.
    #[napi(object, object_to_js = false)]
    pub struct JobOptions {
        #[napi(ts_type = "number")]
        pub at_least_ms: Option<TypeChecked<f64>>,
        #[napi(ts_type = "number")]
        pub at_most_ms: Option<TypeChecked<f64>>,
    }
}

/// The keys `JobOptions` reads, as JS spells them.
#[napi]
pub fn job_option_names() -> Vec<String> {
    JobOptions::FIELDS.iter().map(|f| camel_case(f)).collect()
}

impl JobOptions {
    /// The bounds as the core's raw arguments, once each is of its type.
    pub fn args(self) -> Result<JobArgs, Failure> {
        Ok(JobArgs {
            at_least: number(OptionName::AtLeast, self.at_least_ms)?,
            at_most: number(OptionName::AtMost, self.at_most_ms)?,
            ..JobArgs::new(Unit::Millis)
        })
    }
}

/// The keys `LockOptions` reads, as JS spells them: napi names each field
/// in camelCase.
#[napi]
pub fn lock_option_names() -> Vec<String> {
    LockOptions::FIELDS.iter().map(|f| camel_case(f)).collect()
}

/// The keys `CacheOptions` reads, as JS spells them.
#[napi]
pub fn cache_option_names() -> Vec<String> {
    CacheOptions::FIELDS.iter().map(|f| camel_case(f)).collect()
}

fn camel_case(snake: &str) -> String {
    let mut words = snake.split('_');
    let mut camel = words.next().unwrap_or_default().to_owned();
    for word in words {
        let mut chars = word.chars();
        camel.extend(chars.next().map(|c| c.to_ascii_uppercase()));
        camel.push_str(chars.as_str());
    }
    camel
}

/// A number of permits as JS gives it (a float), checked by the core.
pub fn permit_count(option: OptionName, n: f64) -> Result<i64, Failure> {
    Ok(rlock_core::validate::whole_permits(option, n)?)
}

/// The name among `known` closest to the unknown key `unknown`, if any is
/// close (the core's `closest_option`): the JS face's hint for a mistyped
/// option of any of its options objects.
#[napi]
pub fn closest_option(unknown: String, known: Vec<String>) -> Option<String> {
    let known: Vec<&str> = known.iter().map(String::as_str).collect();
    rlock_core::closest_option(&unknown, &known).map(str::to_owned)
}

impl LockOptions {
    /// The options as the core's raw arguments, once each is of its type.
    pub fn args(self) -> Result<LockArgs, Failure> {
        let defaults = LockArgs::new(Unit::Millis);
        Ok(LockArgs {
            ttl: number(OptionName::Ttl, self.ttl_ms)?,
            timeout: number(OptionName::Timeout, self.timeout_ms)?,
            auto_renew: flag(OptionName::AutoRenew, self.auto_renew)?
                .unwrap_or(defaults.auto_renew),
            max_hold: number(OptionName::MaxHold, self.max_hold_ms)?,
            sync_replicas: number(OptionName::SyncReplicas, self.sync_replicas)?,
            fair: flag(OptionName::Fair, self.fair)?.unwrap_or(defaults.fair),
            queue_after: number(OptionName::QueueAfter, self.queue_after_ms)?,
            allow_long_ttl: flag(OptionName::AllowLongTtl, self.allow_long_ttl)?
                .unwrap_or(defaults.allow_long_ttl),
            ..defaults
        })
    }
}

impl CacheOptions {
    /// The options as the core's raw arguments, once each is of its type.
    /// `ttlMs` is required: absent, it is the wrong type (`undefined`).
    pub fn args(self) -> Result<CacheArgs, Failure> {
        let ttl = match number(OptionName::Ttl, self.ttl_ms)? {
            Some(ttl) => ttl,
            None => return Err(wrong_type(OptionName::Ttl, "a number", "undefined")),
        };
        Ok(CacheArgs {
            ttl: Some(ttl),
            stale: number(OptionName::Stale, self.stale_ms)?,
            none_ttl: number(OptionName::NoneTtl, self.none_ttl_ms)?,
            jitter: number(OptionName::Jitter, self.jitter)?,
            early: number(OptionName::Early, self.early)?,
            timeout: number(OptionName::Timeout, self.timeout_ms)?,
            on_error: text(OptionName::OnError, self.on_error)?,
            lock_ttl: number(OptionName::LockTtl, self.lock_ttl_ms)?,
            ..CacheArgs::new(Unit::Millis)
        })
    }
}

/// An option as JS gave it: a value of its type, or else what `typeof` calls
/// the value given instead. napi's own conversion would throw a plain `Error`
/// for a wrong type; this way it becomes the face's `TypeError` with code
/// `ERR_INVALID_ARG`, naming the option, like every other bad argument.
pub struct TypeChecked<T>(Result<T, &'static str>);

impl FromNapiValue for TypeChecked<f64> {
    unsafe fn from_napi_value(env: sys::napi_env, value: sys::napi_value) -> napi::Result<Self> {
        type_checked(env, value, sys::ValueType::napi_number)
    }
}

impl FromNapiValue for TypeChecked<String> {
    unsafe fn from_napi_value(env: sys::napi_env, value: sys::napi_value) -> napi::Result<Self> {
        type_checked(env, value, sys::ValueType::napi_string)
    }
}

impl FromNapiValue for TypeChecked<bool> {
    unsafe fn from_napi_value(env: sys::napi_env, value: sys::napi_value) -> napi::Result<Self> {
        type_checked(env, value, sys::ValueType::napi_boolean)
    }
}

/// # Safety
///
/// `env` and `value` are the live handles napi passes to `from_napi_value`.
unsafe fn type_checked<T: FromNapiValue>(
    env: sys::napi_env,
    value: sys::napi_value,
    expected: i32,
) -> napi::Result<TypeChecked<T>> {
    let mut kind = 0;
    check_status!(unsafe { sys::napi_typeof(env, value, &mut kind) })?;
    if kind == expected {
        return Ok(TypeChecked(Ok(unsafe { T::from_napi_value(env, value) }?)));
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
    Ok(TypeChecked(Err(type_of)))
}

fn wrong_type(option: OptionName, expected: &'static str, got: &'static str) -> Failure {
    Failure::WrongType {
        option,
        expected,
        got,
    }
}

/// A number option: unset when absent (`null` is a wrong type).
fn number(option: OptionName, given: Option<TypeChecked<f64>>) -> Result<Option<f64>, Failure> {
    match given {
        None => Ok(None),
        Some(TypeChecked(Ok(n))) => Ok(Some(n)),
        Some(TypeChecked(Err(got))) => Err(wrong_type(option, "a number", got)),
    }
}

/// A string option: unset when absent (`null` is a wrong type).
fn text(option: OptionName, given: Option<TypeChecked<String>>) -> Result<Option<String>, Failure> {
    match given {
        None => Ok(None),
        Some(TypeChecked(Ok(s))) => Ok(Some(s)),
        Some(TypeChecked(Err(got))) => Err(wrong_type(option, "a string", got)),
    }
}

/// A boolean option: unset when absent or `null` (as `??` reads it).
fn flag(option: OptionName, given: Option<TypeChecked<bool>>) -> Result<Option<bool>, Failure> {
    match given {
        None | Some(TypeChecked(Err("null"))) => Ok(None),
        Some(TypeChecked(Ok(b))) => Ok(Some(b)),
        Some(TypeChecked(Err(got))) => Err(wrong_type(option, "a boolean", got)),
    }
}
