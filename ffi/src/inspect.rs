//! What a client sees: a lock's holder and waiters, and its own counters,
//! each as the core's one JSON shape (the CLI's `--json`, Python's dicts,
//! Node's objects), for the face to decode into its own types.

use rlock_core::Error;

use crate::completion::{self, Done};
use crate::failure::{RLOCK_INTERNAL, RLOCK_INVALID, RLOCK_OK};
use crate::handles::CLIENTS;
use crate::requests;
use crate::text::RlockStr;

/// Inspects the lock `name` (its mutex, read-write lock and semaphore):
/// completes `token` with the inspection as JSON in data. Returns
/// [`RLOCK_INVALID`] for a handle that is not a live client's (nothing then
/// completes).
///
/// # Safety
/// `name` is readable during the call.
#[no_mangle]
pub unsafe extern "C" fn rlock_inspect(client: u64, name: RlockStr, token: u64) -> i32 {
    if !completion::ready() {
        return RLOCK_INTERNAL;
    }
    let Some(client) = CLIENTS.get(client) else {
        return RLOCK_INVALID;
    };
    requests::guard(token, || {
        let name = name.read("the lock name");
        requests::start(token, false, async move {
            let seen = client.inspect(&name?).await?;
            Ok(Done::Data(seen.to_json().to_string().into_bytes()))
        })
    });
    RLOCK_OK
}

/// The client's counters (acquisitions, waits, renewals, losses...) as JSON
/// in data: completes `token` before returning. Returns [`RLOCK_INVALID`]
/// for a handle that is not a live client's (nothing then completes).
#[no_mangle]
pub extern "C" fn rlock_stats(client: u64, token: u64) -> i32 {
    if !completion::ready() {
        return RLOCK_INTERNAL;
    }
    let Some(client) = CLIENTS.get(client) else {
        return RLOCK_INVALID;
    };
    requests::guard(token, || {
        let stats = client.stats().to_json().to_string().into_bytes();
        completion::complete(token, Ok::<_, Error>(Done::Data(stats)));
        0
    });
    RLOCK_OK
}
