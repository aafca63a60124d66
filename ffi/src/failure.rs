//! The core's failures as the ABI's codes: one per category every face
//! shares, so each face maps them to its own idiom (Go: sentinel errors).

use rlock_core::Error;

pub const RLOCK_OK: i32 = 0;
/// The deadline passed, or a single attempt found the lock held (see [`RLOCK_BUSY`]).
pub const RLOCK_TIMEOUT: i32 = 1;
/// A single attempt found the lock held by someone else.
pub const RLOCK_BUSY: i32 = 2;
/// Release or extension of a lock this owner does not hold.
pub const RLOCK_NOT_OWNER: i32 = 3;
/// The lease ended while the holder still ran.
pub const RLOCK_LOST: i32 = 4;
/// Redis unreachable, authentication refused, or a protocol error.
pub const RLOCK_CONNECTION: i32 = 5;
/// Bad input, refused before any I/O.
pub const RLOCK_INVALID: i32 = 6;
/// The client was closed.
pub const RLOCK_CLOSED: i32 = 7;
/// Write asked by an owner that holds only read.
pub const RLOCK_UPGRADE: i32 = 8;
/// A cache entry's loader failed.
pub const RLOCK_LOADER: i32 = 9;
/// The request was cancelled by [`rlock_cancel`](crate::requests::rlock_cancel).
pub const RLOCK_CANCELLED: i32 = 10;
/// A fault of this library (a panic caught at the boundary), or
/// [`rlock_init`](crate::completion::rlock_init) not called first.
pub const RLOCK_INTERNAL: i32 = 11;

/// (code, message, detail) of a core failure.
pub(crate) fn describe(e: &Error) -> (i32, String, String) {
    let detail = match e {
        Error::InvalidArgument(invalid) => {
            invalid.option.map(|o| o.name()).unwrap_or("").to_owned()
        }
        Error::Lost { reason, .. } => reason.as_str().to_owned(),
        Error::NotOwned { reason, .. } => reason.as_str().to_owned(),
        Error::LoaderFailed { key, .. } => key.clone(),
        _ => String::new(),
    };
    let message = match e {
        // The option's name is the face's to spell: the message follows it.
        Error::InvalidArgument(invalid) if invalid.option.is_some() => invalid.message.clone(),
        _ => e.to_string(),
    };
    let code = match e {
        Error::Timeout { .. } => RLOCK_TIMEOUT,
        Error::Busy { .. } => RLOCK_BUSY,
        Error::NotOwned { .. } => RLOCK_NOT_OWNER,
        Error::Lost { .. } => RLOCK_LOST,
        Error::Connection(_) => RLOCK_CONNECTION,
        Error::InvalidArgument(_) => RLOCK_INVALID,
        Error::Closed => RLOCK_CLOSED,
        Error::Upgrade { .. } => RLOCK_UPGRADE,
        Error::LoaderFailed { .. } => RLOCK_LOADER,
    };
    (code, message, detail)
}
