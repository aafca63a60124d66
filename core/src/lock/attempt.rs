//! One acquire round trip, recorded in the holdings table when it acquired,
//! and safe to drop: an attempt dropped before its reply is finished in the
//! background, and what it acquired released.

use std::future::Future;
use std::pin::Pin;
use std::task::{self, Poll};

use tokio::time::Instant;

use super::Lock;
use crate::error::{LostReason, NotOwnedReason, Result};
use crate::holdings::HoldingView;
use crate::redis::deployment::Attempt;
use crate::redis::endpoint::{AcquireRequest, ReleaseOf};

impl Lock {
    /// One acquire round trip, recorded in the holdings table on success.
    /// Cancel-safe: if the caller stops waiting while the request is in
    /// flight, the request still completes and an acquisition it made is
    /// released rather than leaked.
    pub(super) fn attempt(&self, enter_line: bool) -> FinishOnDrop {
        let lock = self.clone();
        FinishOnDrop {
            fut: Some(Box::pin(
                async move { lock.attempt_inner(enter_line).await },
            )),
            lock: self.clone(),
            enter_line,
        }
    }

    async fn attempt_inner(&self, enter_line: bool) -> Result<Attempt> {
        let context = self.context();
        let _request = self.mutexes.request.lock().await;
        let lease = self.options.first_lease();
        // What this owner holds, read once: the request carries it, so a
        // resend after a lost reply is recognised, and the reply is checked
        // against it.
        let held = match context.holdings.view(&self.keys.lock, &self.owner) {
            Some(v) => match v.lost {
                None => Some(v),
                // A scope of this owner runs on a lost holding: an
                // acquisition inside it is lost too. Taking the lock afresh
                // here would merge the scopes, and the inner one's release
                // would free the lock under the outer one, which would never
                // hear of its loss.
                Some(reason) if v.open_scopes() => return Err(self.lost_error(reason)),
                Some(_) => None,
            },
            None => None,
        };
        // Waiters of this client that left the line unconfirmed go first.
        let left = context.waiters.left_owners(&self.keys.lock);
        let request = AcquireRequest {
            left: &left.owners,
            keys: &self.keys,
            owner: &self.owner,
            lease,
            believed: held.map_or(0, |v| v.count),
            // A re-entry never waits in line: a busy answer is a loss.
            enter_line: enter_line && held.is_none(),
            replicas: self.options.sync_replicas,
            kind: self.kind,
            fair: self.options.fair,
        };
        let mut sent = Instant::now();
        let mut attempt = context.deployment.acquire(&request).await?;
        context
            .waiters
            .left_confirmed(&self.keys.lock, &left.owners);
        drop(left);
        if let Some(view) = held {
            self.check_re_entry(view, &attempt).await?;
        }
        let drift = context.deployment.drift(lease);
        let late = |sent: Instant| Instant::now() + drift >= sent + lease;
        // (Redlock's own validity check refuses a late majority already.)
        if let (Attempt::Held { fence, count: 1 }, false) =
            (&attempt, context.deployment.is_redlock())
        {
            let fence = *fence;
            if late(sent) {
                // The reply came after the lease timed from the request (a
                // stalled wire): Redis may hold it for this owner a while
                // yet, but nothing this client measured says so. An
                // extension it times itself does, or shows it ended; if
                // that fails or is late too, the grant is given back.
                sent = Instant::now();
                let lease_ms = lease.as_millis() as u64;
                let replicas = self.options.sync_replicas;
                let confirmed = context
                    .deployment
                    .extend(&self.keys, &self.owner, lease_ms, replicas, fence)
                    .await;
                let why = match confirmed {
                    Ok(Ok(_)) if !late(sent) => None,
                    Ok(Ok(_)) => Some("and so did the reply confirming it".to_owned()),
                    Ok(Err(reason)) => Some(format!("and it ended ({reason})")),
                    Err(e) => Some(format!("and confirming it failed ({e})")),
                };
                if let Some(why) = why {
                    self.give_back(fence).await;
                    attempt = Attempt::Busy {
                        retry_in_ms: rand::random_range(5..=50),
                        cause: Some(format!("granted, but the reply came after its lease {why}")),
                        backoff: true,
                        waiters_in_line: false,
                        undone: Some(fence),
                        issued: fence,
                    };
                }
            }
        }
        // A fresh holding may be a grant handed to this owner (an entry of
        // its own left in line), whose message may still come: this client
        // must know it is no new grant. Only a client that listens on some
        // channel can hear one.
        if enter_line || context.waiters.listens_at_all() {
            if let Attempt::Held { fence, count: 1 }
            | Attempt::Busy {
                undone: Some(fence),
                ..
            } = &attempt
            {
                self.took_in_line(*fence);
            }
        }
        if let Attempt::Held { fence, count } = attempt {
            context
                .holdings
                .acquired(&self.terms(), fence, count, sent, drift);
        }
        Ok(attempt)
    }

    /// A re-entry is answered by the holding it re-enters (counted above 1,
    /// under the same token on one deployment; Redlock's token is the
    /// largest of the masters that answered, which may differ from one
    /// quorum to the next), or that holding ended in Redis while this owner
    /// still held it by its clock: a fresh take is given back, and the
    /// holding and this acquisition are lost. A busy answer is a loss only
    /// when it is plain: one given back for too few replicas, or Redlock's
    /// (a minority of masters unreachable), leaves the wait to go on.
    async fn check_re_entry(&self, held: HoldingView, attempt: &Attempt) -> Result<()> {
        let context = self.context();
        let redlock = context.deployment.is_redlock();
        let reason = match *attempt {
            Attempt::Held { fence, count } if count > 1 && (redlock || fence == held.fence) => {
                return Ok(())
            }
            Attempt::Held { fence, .. } => {
                self.give_back(fence).await;
                NotOwnedReason::Expired
            }
            Attempt::Busy {
                backoff: false,
                undone: None,
                ..
            } if !redlock => NotOwnedReason::HeldByAnother,
            Attempt::Busy { .. } => return Ok(()),
        };
        context.holdings.lose(&self.keys.lock, &self.owner, reason);
        let lost = self.lost().unwrap_or(LostReason::Expired);
        Err(self.lost_error(lost))
    }

    /// Gives back a grant this owner must not keep (token `fence`), in the
    /// background until Redis answers if this try fails.
    async fn give_back(&self, fence: u64) {
        let lease_ms = self.options.first_lease().as_millis() as u64;
        let given_back = self
            .context()
            .deployment
            .release(&self.keys, &self.owner, lease_ms, ReleaseOf::grant(fence))
            .await;
        if given_back.is_err() {
            self.clone()
                .clean_up(move |lock| async move { lock.pass_on_persistently(fence).await });
        }
    }
}

type AttemptFuture = Pin<Box<dyn Future<Output = Result<Attempt>> + Send>>;

/// An acquire request that, if dropped before it completes, is driven to
/// completion in the background and released if it acquired.
pub(super) struct FinishOnDrop {
    fut: Option<AttemptFuture>,
    lock: Lock,
    /// The attempt may put this owner in line.
    enter_line: bool,
}

impl Future for FinishOnDrop {
    type Output = Result<Attempt>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut task::Context<'_>) -> Poll<Self::Output> {
        let fut = self.fut.as_mut().expect("polled after completion");
        let out = std::task::ready!(fut.as_mut().poll(cx));
        self.fut = None;
        Poll::Ready(out)
    }
}

impl Drop for FinishOnDrop {
    fn drop(&mut self) {
        if let Some(fut) = self.fut.take() {
            let enter_line = self.enter_line;
            self.lock.clone().clean_up(move |lock| async move {
                match fut.await {
                    Ok(Attempt::Held { .. }) => {
                        tracing::debug!(target: "rlock", lock = %lock.name, "acquired after cancellation; releasing");
                        lock.release_persistently().await;
                    }
                    // Sent again after a lost reply, it may have put this
                    // owner back in line after its wait left it.
                    Ok(Attempt::Busy { .. }) if enter_line => lock.leave_line().await,
                    _ => {}
                }
            });
        }
    }
}
