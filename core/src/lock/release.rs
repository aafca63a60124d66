//! Releasing one acquisition: the request carries what its holder believes
//! it holds, so a resend after a lost reply is recognised, and its answer (or
//! its absence) settles the holding it set out to release and no other.

use tokio::time::Instant;

use super::Lock;
use crate::error::{Error, Result};
use crate::redis::endpoint::ReleaseOf;

/// See [`Lock::release`]. With `only`, the release is of the holding of
/// that generation alone: when this owner no longer has it (released, or
/// replaced by a later holding of its own), nothing is sent and nothing is
/// left (`Ok(0)`). Checked under the owner's request mutex, so no
/// acquisition of this owner lands between the check and the send.
pub(super) async fn run(lock: &Lock, only: Option<u64>) -> Result<u32> {
    let context = lock.context();
    let _request = lock.mutexes.request.lock().await;
    if let Some(generation) = only {
        let current = context.holdings.view(&lock.keys.lock, &lock.owner);
        if current.map(|v| v.generation) != Some(generation) {
            return Ok(0);
        }
    }
    // What remains after a nested release keeps the lease this holding
    // runs on, so Redis and the holder agree on when it ends.
    let lease = context
        .holdings
        .current_lease(&lock.keys.lock, &lock.owner)
        .unwrap_or_else(|| lock.options.first_lease());
    // The holder's view, carried by the request so that a resend is
    // recognised (see `ReleaseOf`).
    let view = context.holdings.view(&lock.keys.lock, &lock.owner);
    // A lost holding is released as the holder counts it too: Redis may
    // hold it still, its count ahead of the holder's (a re-entry applied
    // whose replies were lost), and the scopes the holder has are all
    // there are to end.
    let of = match view {
        Some(v) => ReleaseOf {
            before: i64::from(v.count),
            fence: v.fence,
            last_valid_until: (v.count == 1 && v.lost.is_none()).then_some(v.expires_at),
            ..ReleaseOf::ANY
        },
        None => ReleaseOf::ANY,
    };
    let releasing = context.holdings.releasing(&lock.keys.lock, &lock.owner);
    let sent = Instant::now();
    // Boxed, as in `acquire`: the exchange with Redis is the large part of
    // this future, and the faces move theirs around before polling it.
    let outcome = match Box::pin(context.deployment.release(
        &lock.keys,
        &lock.owner,
        lease.as_millis() as u64,
        of,
    ))
    .await
    {
        Ok(outcome) => outcome,
        Err(e @ Error::Connection(_)) => match releasing.unanswered() {
            // A nested release is counted as done whether it landed or
            // not (the next release settles Redis' count): so it is
            // reported done, and a retry by the caller cannot undo the
            // outer scope's holding.
            Some(left) => {
                tracing::warn!(target: "rlock", lock = %lock.name, error = %e, "nested release unanswered; counted as done");
                return Ok(left);
            }
            None => return Err(e),
        },
        Err(e) => {
            releasing.unanswered();
            return Err(e);
        }
    };
    match outcome {
        Ok(remaining) => {
            let drift = context.deployment.drift(lease);
            releasing.succeeded(remaining, lease, sent, drift);
            tracing::debug!(target: "rlock", lock = %lock.name, remaining, "released");
            Ok(remaining)
        }
        Err(answer) => {
            let reason =
                context
                    .holdings
                    .refusal(&lock.keys.lock, &lock.owner, view.is_some(), answer);
            // Scopes outside this one still believe they hold it: each must
            // end with the loss, not with "already released".
            let outer_scopes = view.map_or(0, |v| v.count.saturating_sub(1));
            if outer_scopes > 0 {
                releasing.lost_for(outer_scopes, reason);
            } else {
                releasing.forget();
            }
            tracing::debug!(target: "rlock", lock = %lock.name, %reason, "release refused");
            Err(Error::NotOwned {
                name: lock.name.to_string(),
                reason,
            })
        }
    }
}
