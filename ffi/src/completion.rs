//! How a request's outcome reaches the caller: one completion function,
//! given once to [`rlock_init`], called once per request with the token the
//! caller started it with (a Go `cgo.Handle`, a pointer, an index: the
//! crate never reads it). It is called from a runtime thread, or for the
//! calls that make a handle before that call returns; it must not block
//! (hand the outcome on and return), and it must copy what it keeps of the
//! outcome's strings, which live only during the call.

use std::os::raw::c_char;
use std::sync::OnceLock;

use rlock_core::Error;

use crate::failure::{self, RLOCK_OK};
use crate::runtime;
use crate::text::RlockStr;

/// A request's outcome, valid during the completion call only.
#[repr(C)]
pub struct RlockOutcome {
    /// [`RLOCK_OK`](crate::failure::RLOCK_OK) or the failure's category (`RLOCK_*`).
    pub code: i32,
    /// What succeeded: a handle (a client, a lock), a fencing token, a count; 0 otherwise.
    pub value: u64,
    /// An acquisition's re-entry depth (1: fresh); 0 otherwise.
    pub count: u32,
    /// A second handle: a read-write lock's read side (its write side is
    /// `value`); 0 otherwise.
    pub other: u64,
    /// The failure's message (empty on success).
    pub message: RlockStr,
    /// Bad input: the option at fault, in the core's spelling (`ttl`,
    /// `queue_after`), empty for another argument; lost or not owner: the
    /// reason (`expired`, `held_by_another`, ...); a cache read: the value's
    /// format tag; empty otherwise.
    pub detail: RlockStr,
    /// A cache read's value (when `has_data`: a value, possibly empty;
    /// otherwise none, or "nothing found").
    pub data: RlockStr,
    pub has_data: bool,
}

/// The caller's completion function.
pub type RlockCompleteFn = extern "C" fn(token: u64, outcome: *const RlockOutcome);

static COMPLETE: OnceLock<RlockCompleteFn> = OnceLock::new();

/// Sets the completion function and starts the core's runtime. Call it once,
/// before any request; a second call with the same function does nothing.
/// Returns [`RLOCK_OK`](crate::failure::RLOCK_OK), or
/// [`RLOCK_INTERNAL`](crate::failure::RLOCK_INTERNAL) when `complete` is
/// NULL, another function was set before, or the runtime cannot start.
#[no_mangle]
pub extern "C" fn rlock_init(complete: Option<extern "C" fn(u64, *const RlockOutcome)>) -> i32 {
    // NULL is refused, not called.
    let Some(complete) = complete else {
        return failure::RLOCK_INTERNAL;
    };
    let set = *COMPLETE.get_or_init(|| complete);
    if set as usize != complete as usize || runtime::get().is_none() {
        return failure::RLOCK_INTERNAL;
    }
    RLOCK_OK
}

/// Whether requests can complete: [`rlock_init`] was called.
pub(crate) fn ready() -> bool {
    COMPLETE.get().is_some() && runtime::get().is_some()
}

/// What a request ended with.
pub(crate) enum Done {
    Value(u64),
    Pair(u64, u64),
    Acquired {
        fence: u64,
        count: u32,
    },
    /// Bytes for the caller (JSON of an inspection, of statistics).
    Data(Vec<u8>),
    /// A cache read: its kind (0 hit, 1 load, 2 refresh), the rebuild's
    /// handle (0: none), and the entry read, if any.
    Read {
        kind: u32,
        rebuild: u64,
        entry: Option<rlock_core::Entry>,
    },
}

/// One outcome, before it is laid out for the caller.
#[derive(Default)]
struct Out<'a> {
    code: i32,
    value: u64,
    count: u32,
    other: u64,
    message: &'a str,
    detail: &'a str,
    data: Option<&'a [u8]>,
}

/// Hands `token`'s outcome to the caller.
pub(crate) fn complete(token: u64, outcome: Result<Done, Error>) {
    match outcome {
        Ok(Done::Value(value)) => send(
            token,
            Out {
                value,
                ..Out::default()
            },
        ),
        Ok(Done::Pair(value, other)) => send(
            token,
            Out {
                value,
                other,
                ..Out::default()
            },
        ),
        Ok(Done::Acquired { fence, count }) => send(
            token,
            Out {
                value: fence,
                count,
                ..Out::default()
            },
        ),
        Ok(Done::Data(data)) => send(
            token,
            Out {
                data: Some(&data),
                ..Out::default()
            },
        ),
        Ok(Done::Read {
            kind,
            rebuild,
            entry,
        }) => {
            let (fence, format, data) = match &entry {
                Some(e) => (e.fence, e.format.as_str(), e.value.as_deref()),
                None => (0, "", None),
            };
            send(
                token,
                Out {
                    value: rebuild,
                    count: kind,
                    other: fence,
                    detail: format,
                    data,
                    ..Out::default()
                },
            )
        }
        Err(e) => {
            let (code, message, detail) = failure::describe(&e);
            send(
                token,
                Out {
                    code,
                    message: &message,
                    detail: &detail,
                    ..Out::default()
                },
            )
        }
    }
}

/// A lost holding's notice for `token`: the holding's fencing token, the
/// message and the reason.
pub(crate) fn lost(token: u64, fence: u64, message: &str, reason: &str) {
    send(
        token,
        Out {
            code: failure::RLOCK_LOST,
            value: fence,
            message,
            detail: reason,
            ..Out::default()
        },
    )
}

/// A failure that is not the core's (a panic caught, a request cancelled)
/// for `token`.
pub(crate) fn fail(token: u64, code: i32, message: &str) {
    send(
        token,
        Out {
            code,
            message,
            ..Out::default()
        },
    )
}

fn send(token: u64, out: Out<'_>) {
    let Some(complete) = COMPLETE.get() else {
        return;
    };
    let laid_out = RlockOutcome {
        code: out.code,
        value: out.value,
        count: out.count,
        other: out.other,
        message: borrowed(out.message.as_bytes()),
        detail: borrowed(out.detail.as_bytes()),
        data: borrowed(out.data.unwrap_or_default()),
        has_data: out.data.is_some(),
    };
    complete(token, &laid_out);
}

fn borrowed(s: &[u8]) -> RlockStr {
    RlockStr {
        ptr: s.as_ptr().cast::<c_char>(),
        len: s.len(),
    }
}
