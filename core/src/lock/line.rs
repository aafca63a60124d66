//! The waiting line, which one Redis deployment keeps (Redlock has none):
//! joining it (listening on the client's waiter channel for a handoff to this
//! owner), a waiter's place in it and a grant handed to it (each passed on if
//! the wait is dropped, so no handoff is ever stranded), confirming a
//! handoff, passing on a grant this owner will not use, and leaving the line.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::cancel::RETRY_PAUSES;
use super::{Acquired, Lock};
use crate::context::Client;
use crate::error::{Error, Result};
use crate::redis::endpoint::ReleaseOf;
use crate::wakeups::registry::{Handoff, Orphans, Ticket};

/// A waiter in line: where its handoff arrives, and its entry.
pub(super) struct Line {
    pub(super) ticket: Ticket,
    spot: InLine,
}

impl Line {
    pub(super) fn settled(self) {
        self.spot.settled();
    }

    pub(super) async fn leave(self) {
        self.spot.leave().await;
    }
}

/// A waiter's place in line. Leaving (a timeout, or a cancelled wait
/// when dropped) takes the entry out, and passes the lock on if a release
/// handed it over meanwhile, so no handoff is ever stranded.
struct InLine {
    /// None once settled or left: nothing is left for `drop` to do. (Taken
    /// out rather than `mem::forget`-ing the place: a forgotten `Lock` would
    /// keep its owner id and its whole client alive for ever.)
    lock: Option<Lock>,
}

impl InLine {
    /// The waiter got the lock: its entry is gone already.
    fn settled(mut self) {
        self.lock = None;
    }

    async fn leave(mut self) {
        // Taken only once left: if this is dropped on the way, `drop` leaves
        // (again: leaving twice is harmless).
        if let Some(lock) = &self.lock {
            lock.leave_line().await;
        }
        self.lock = None;
    }
}

impl Drop for InLine {
    fn drop(&mut self) {
        if let Some(lock) = self.lock.take() {
            lock.clean_up(|lock| async move { lock.leave_line().await });
        }
    }
}

/// A grant handed to a waiter that is confirming it: passed on if the wait
/// is dropped before it knows whether it holds the grant, so a cancelled
/// wait never strands it.
pub(super) struct Grant {
    pub(super) lock: Option<Lock>,
    pub(super) fence: u64,
}

impl Grant {
    /// The wait holds the grant, or it had ended: nothing to pass on.
    pub(super) fn settle(mut self) {
        self.lock = None;
    }
}

impl Drop for Grant {
    fn drop(&mut self) {
        let fence = self.fence;
        if let Some(lock) = self.lock.take() {
            lock.clean_up(move |lock| async move { lock.pass_on_persistently(fence).await });
        }
    }
}

impl Lock {
    /// Listens on this client's waiter channel for a handoff to this owner;
    /// the next attempt made with `enter_line` takes a place in line.
    pub(super) async fn join_line(&self, channel: &str, deadline: Option<Instant>) -> Line {
        let context = self.context();
        let ticket = context.join(channel, Some(&self.owner), deadline).await;
        context.waiters.on_orphan(channel, || self.orphan_handler());
        Line {
            ticket,
            spot: InLine {
                lock: Some(self.clone()),
            },
        }
    }

    /// What passes on a handoff that reaches no waiter of this client (its
    /// waiter left the line, and its dequeue failed or has not run yet):
    /// without it the grant would sit unused until its lease ended. Holds
    /// the client weakly: the registry it is kept in belongs to the client.
    fn orphan_handler(&self) -> Orphans {
        let client = Arc::downgrade(&self.client.context);
        let lock = (self.name.clone(), self.keys.clone(), self.options.clone());
        let kind = self.kind;
        Arc::new(move |owner: &str, fence: u64| {
            let Some(context) = client.upgrade() else {
                return;
            };
            let (name, keys, options) = lock.clone();
            let owner: Arc<str> = Arc::from(owner);
            let orphan = Lock {
                mutexes: context.owner_mutexes.of(&keys.lock, &owner),
                client: Client { context },
                name,
                keys,
                owner,
                options,
                kind,
            };
            tracing::debug!(target: "rlock", lock = %orphan.name, fence, "handoff to a waiter that left; passing it on");
            orphan.clean_up(move |lock| async move { lock.pass_on_persistently(fence).await });
        })
    }

    /// A release handed this waiter in line the lock (token `fence`). Its
    /// lease started when that release ran, which the waiter cannot see: the
    /// message may come late (a slow pub/sub wire). What it can see is its
    /// last attempt that found the lock busy (`since`: when it was sent, and
    /// the last token issued when it ran). A grant with a larger token was
    /// made by a release that ran after that attempt, so a lease timed from
    /// its send ends before Redis' own. While more than half a lease is left
    /// by that reckoning (a handoff soon after an attempt, as under
    /// contention), and Redis set the lease this wait asked for (the message
    /// says which), the waiter holds the lock from the message alone;
    /// otherwise, and with `sync_replicas`, it confirms this very grant with
    /// an extension it times itself (one round trip), which also sets its own
    /// lease. `Ok(None)`: the grant had ended.
    pub(super) async fn confirm_handoff(
        &self,
        handoff: Handoff,
        since: Option<(Instant, u64)>,
    ) -> Result<Option<Acquired>> {
        let context = self.context();
        let lease = self.options.first_lease();
        let fence = handoff.fence;
        // A lease shorter than this wait's was asked by an earlier wait of
        // this owner whose place in line outlived it: never believed longer.
        let own_lease = handoff
            .lease_ms
            .is_none_or(|ms| u128::from(ms) >= lease.as_millis());
        let replicas = self.options.sync_replicas;
        let _request = self.mutexes.request.lock().await;
        if self.view().is_some_and(|v| v.fence == fence) {
            // A single attempt of this owner took this grant meanwhile: this
            // wait re-enters it with its next attempt instead (which finds
            // it lost, if it was lost since).
            return Ok(None);
        }
        let now = Instant::now();
        let sent = match since {
            Some((sent, issued))
                if own_lease && replicas.is_none() && fence > issued && now < sent + lease / 2 =>
            {
                sent
            }
            _ => {
                let sent = Instant::now();
                let confirmed = context
                    .deployment
                    .extend(
                        &self.keys,
                        &self.owner,
                        lease.as_millis() as u64,
                        replicas,
                        fence,
                    )
                    .await?;
                if let Err(reason) = confirmed {
                    tracing::debug!(target: "rlock", lock = %self.name, %reason, "handed a grant that ended");
                    return Ok(None);
                }
                sent
            }
        };
        let drift = context.deployment.drift(lease);
        context
            .holdings
            .acquired(&self.terms(), fence, 1, sent, drift);
        tracing::debug!(target: "rlock", lock = %self.name, fence, "handed over");
        Ok(Some(self.acquired(fence, 1)))
    }

    /// This owner, in line, learnt of a grant to it other than from its
    /// handoff message (it took it, or gave it back at once), which may still
    /// be on its way or read already: that message is then stale, not a new
    /// grant.
    pub(super) fn took_in_line(&self, fence: u64) {
        let context = self.context();
        context
            .waiters
            .took(&self.keys.waiter_channel(&context.id), &self.owner, fence);
    }

    pub(super) async fn leave_line(&self) {
        // A closed client has no line left to leave: its waiter channel went
        // with its connections.
        if let Err(e) = self.dequeue().await {
            if matches!(e, Error::Closed) {
                return;
            }
            // Until Redis confirms it, this client's next attempt on the lock
            // takes the entry out first: while another waiter of this client
            // waits on the name, the entry would look alive.
            self.context()
                .waiters
                .left_unconfirmed(&self.keys.lock, &self.owner);
            // Tried again in the background, so a timeout is not held up by
            // an unreachable Redis; until then a handoff to the entry left
            // behind is passed on when its message comes (see `join_line`).
            self.clone().clean_up(|lock| async move {
                for pause in RETRY_PAUSES {
                    tokio::time::sleep(pause).await;
                    if lock.dequeue().await.is_ok() {
                        break;
                    }
                }
            });
        }
    }

    /// Takes this owner's entry out of the line; a grant it was handed
    /// meanwhile is passed on.
    async fn dequeue(&self) -> Result<()> {
        let context = self.context();
        let dequeued = context.deployment.dequeue(&self.keys, &self.owner).await;
        if dequeued.is_ok() {
            context
                .waiters
                .left_confirmed(&self.keys.lock, &[&*self.owner]);
        }
        match dequeued {
            Ok(Some(fence)) => {
                tracing::debug!(target: "rlock", lock = %self.name, "handed over while leaving; passing it on");
                self.took_in_line(fence);
                if self.pass_on(fence).await.is_err() {
                    self.clone().clean_up(move |lock| async move {
                        lock.pass_on_persistently(fence).await
                    });
                }
                Ok(())
            }
            Ok(None) => Ok(()),
            Err(e) => {
                tracing::debug!(target: "rlock", lock = %self.name, error = %e, "leaving the line failed");
                Err(e)
            }
        }
    }

    /// [`pass_on`](Self::pass_on) in the background, tried again while Redis
    /// does not answer (the grant would otherwise sit until its lease ends).
    pub(super) async fn pass_on_persistently(&self, fence: u64) {
        for pause in std::iter::once(Duration::ZERO).chain(RETRY_PAUSES) {
            tokio::time::sleep(pause).await;
            if self.pass_on(fence).await.is_ok() {
                return;
            }
        }
    }

    /// Passes on the grant with token `fence` that this owner was handed and
    /// will not use (it left the line, or could not confirm it): to the next
    /// waiter in line, or freed; never a later holding of this owner, and
    /// not this one if the owner took it meanwhile (by an attempt of its own).
    async fn pass_on(&self, fence: u64) -> Result<()> {
        let context = self.context();
        let lease = self.options.first_lease().as_millis() as u64;
        let _request = self.mutexes.request.lock().await;
        if self.view().is_some_and(|v| v.fence == fence) {
            return Ok(());
        }
        context
            .deployment
            .release(&self.keys, &self.owner, lease, ReleaseOf::grant(fence))
            .await
            .map(|_| ())
    }
}
