//! A lock by name, as one owner sees it: acquire (one attempt, wait with
//! deadline, wait forever), release, extend, and queries. The public
//! operations are here; how the longer ones work is beside this file:
//! `lock/acquire.rs` (how an acquisition waits, as a state machine),
//! `lock/attempt.rs` (one acquire round trip), `lock/line.rs` (the waiting
//! line and its handoffs), `lock/release.rs`, and `lock/cancel.rs` (finishing
//! what an abandoned wait leaves behind).

mod acquire;
mod attempt;
mod cancel;
mod line;
mod release;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;
use tracing::Instrument;

use crate::context::{Client, Context};
use crate::error::{Error, LostReason, OptionName, Result};
use crate::holdings::{HoldTerms, HoldingView};
use crate::keys::Keys;
use crate::kind::Kind;
use crate::options::{self, LockOptions, Wait};
use crate::owner_mutexes::OwnerMutexes;
use crate::redis::scripts::{LockState, ManyHolderState};

/// What an acquisition gives its holder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Acquired {
    /// Strictly larger on every fresh acquisition of this name; unchanged by re-entry.
    pub fencing_token: u64,
    /// Re-entry depth after this acquisition (1: fresh).
    pub count: u32,
}

/// A lock by name, as seen by one owner: the handle that made it (Rust and
/// Node), or the thread or task a binding names. Clones are the same owner.
#[derive(Clone)]
pub struct Lock {
    client: Client,
    name: Arc<str>,
    keys: Arc<Keys>,
    owner: Arc<str>,
    options: LockOptions,
    /// What it takes: the mutex, a side of a read-write lock, permits.
    kind: Kind,
    /// This owner's mutexes on this lock: one request and one wait at a time
    /// (see `owner_mutexes.rs`).
    mutexes: Arc<OwnerMutexes>,
}

impl std::fmt::Debug for Lock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lock")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("options", &self.options)
            .finish()
    }
}

impl Lock {
    pub(crate) fn new(
        client: Client,
        name: &str,
        options: LockOptions,
        unit: &str,
        kind: Kind,
    ) -> Result<Self> {
        options::name(name)?;
        options.check()?;
        if kind.family().is_many_holder() && client.context.deployment.is_redlock() {
            // Their holders and their line live in one Redis; several
            // masters would each count a different set of holders.
            return Err(Error::invalid(
                "read-write locks and semaphores need one Redis deployment (a server, Sentinel or Cluster), not Redlock",
            ));
        }
        if options.sync_replicas.is_some() && client.context.deployment.is_redlock() {
            // Each master's replicas are its own; a majority of masters is
            // Redlock's answer to losing one.
            return Err(Error::invalid(
                "sync_replicas needs one Redis deployment (a server, Sentinel or Cluster), not Redlock",
            ));
        }
        if options.fair && client.context.deployment.is_redlock() {
            // A line kept on each of several masters has no single order to
            // hand the lock over in.
            return Err(Error::invalid(
                "fair mode needs one Redis deployment (a server, Sentinel or Cluster), not Redlock",
            ));
        }
        let keys = Arc::new(Keys::of(kind.family(), &client.context.prefix, name));
        let owner = owner_id(&client.context.id, unit, kind);
        let mutexes = client.context.owner_mutexes.of(&keys.lock, &owner);
        Ok(Lock {
            client,
            name: Arc::from(name),
            keys,
            owner,
            options,
            kind,
            mutexes,
        })
    }

    /// The same lock seen by another owner unit (a binding's thread or task).
    pub fn with_owner(&self, unit: &str) -> Lock {
        self.as_owner(owner_id(&self.context().id, unit, self.kind))
    }

    /// The same lock, taking another kind of the same family (the other
    /// side of a read-write lock, another number of permits), for the same
    /// owner unit.
    pub(crate) fn as_kind(&self, kind: Kind) -> Lock {
        debug_assert_eq!(kind.family(), self.kind.family());
        let owner = owner_id(&self.context().id, self.owner_unit(), kind);
        Lock {
            kind,
            ..self.as_owner(owner)
        }
    }

    /// The owner id without the client id before it and the kind's suffix.
    fn owner_unit(&self) -> &str {
        let unit = &self.owner[self.context().id.len() + 1..];
        &unit[..unit.len() - self.kind.owner_suffix().len()]
    }

    /// What this handle takes.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// The same lock seen by the owner with this full id.
    fn as_owner(&self, owner: Arc<str>) -> Lock {
        Lock {
            mutexes: self.context().owner_mutexes.of(&self.keys.lock, &owner),
            owner,
            ..self.clone()
        }
    }

    /// What this lock's client shares with every part of it.
    fn context(&self) -> &Context {
        &self.client.context
    }

    /// The client this lock was made on.
    pub fn client(&self) -> &Client {
        &self.client
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn keys(&self) -> &Keys {
        &self.keys
    }

    pub fn options(&self) -> &LockOptions {
        &self.options
    }

    /// This owner's full id, as stored in the lock's `owner` field.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// Acquires the lock, waiting as `wait` allows. Fails with
    /// [`Error::Timeout`] when the lock stays busy until the deadline, and
    /// with [`Error::Busy`] when a single attempt finds it held (there was no
    /// deadline to speak of).
    pub async fn acquire(&self, wait: Wait) -> Result<Acquired> {
        let span = tracing::debug_span!("acquire", lock = %self.name);
        // Boxed: the waiting state machine is large, and callers nest it in
        // their own futures.
        Box::pin(acquire::run(self, wait).instrument(span))
            .await
            .map_err(|e| said_of(e, wait))
    }

    /// One attempt: `Some` when acquired, `None` when someone else holds it.
    pub async fn try_acquire(&self) -> Result<Option<Acquired>> {
        match self.acquire(Wait::Once).await {
            Ok(a) => Ok(Some(a)),
            // Busy: held by someone else; a timeout saying why (a missed
            // Redlock quorum): not had either.
            Err(Error::Busy { .. } | Error::Timeout { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn acquired(&self, fencing_token: u64, count: u32) -> Acquired {
        tracing::debug!(target: "rlock", lock = %self.name, fence = fencing_token, count, "acquired");
        Acquired {
            fencing_token,
            count,
        }
    }

    fn timeout(&self, cause: Option<String>) -> Error {
        Error::Timeout {
            name: self.name.to_string(),
            cause,
        }
    }

    fn lost_error(&self, reason: LostReason) -> Error {
        Error::Lost {
            name: self.name.to_string(),
            reason,
        }
    }

    fn terms(&self) -> HoldTerms {
        HoldTerms {
            name: self.name.clone(),
            keys: self.keys.clone(),
            owner: self.owner.clone(),
            lease: self.options.first_lease(),
            auto_renew: self.options.auto_renew,
            max_hold: self.options.max_hold,
        }
    }

    /// Releases one acquisition; returns the re-entries left (0: the lock is
    /// free and its waiters were told). Fails with [`Error::NotOwned`] when this
    /// owner does not hold it, and never touches another owner's lock.
    pub async fn release(&self) -> Result<u32> {
        release::run(self, None).await
    }

    /// Ends a scoped holding (a `with` block, `using()`, `rlock exec`): releases,
    /// and reports a lease that ended during the scope as [`Error::Lost`],
    /// which takes precedence over how the release went.
    pub async fn finish(&self) -> Result<()> {
        let lost = self.lost();
        let released = self.release().await;
        // A refusal about a holding this owner had is a loss; one about no
        // holding (released within the scope already) is reported as it is.
        let reason = match (lost, &released) {
            (Some(reason), _) => reason,
            (None, Err(Error::NotOwned { reason, .. })) => match reason.lost() {
                Some(lost) => lost,
                None => return released.map(|_| ()),
            },
            (None, _) => return released.map(|_| ()),
        };
        Err(self.lost_error(reason))
    }

    /// Ends a scoped holding by leaving it to end in Redis `left` from now
    /// instead of releasing it (a run-once job's lock, kept until its
    /// `at_least`): the lease is set to `left` (tried again a few times
    /// while Redis does not answer), and the holding is no longer this
    /// client's to renew or release. Never a release: a holding whose lease
    /// cannot be set keeps the one it had. A lease that ended during the
    /// scope is [`Error::Lost`], as with [`finish`](Self::finish).
    pub async fn keep_for(&self, left: Duration) -> Result<()> {
        let context = self.context();
        let forget = || context.holdings.forget(&self.keys.lock, &self.owner);
        if let Some(reason) = self.lost() {
            forget();
            return Err(self.lost_error(reason));
        }
        let mut pauses = cancel::RETRY_PAUSES.iter();
        loop {
            match self.extend(Some(left)).await {
                Ok(()) => {
                    forget();
                    return Ok(());
                }
                Err(Error::NotOwned { reason, .. }) => {
                    let lost = self.lost().or(reason.lost()).unwrap_or(LostReason::Expired);
                    forget();
                    return Err(self.lost_error(lost));
                }
                Err(e) => match pauses.next() {
                    Some(pause) => tokio::time::sleep(*pause).await,
                    None => {
                        forget();
                        return Err(e);
                    }
                },
            }
        }
    }

    /// [`finish`](Self::finish) for a scope that owns the handle rather than an
    /// acquisition (JavaScript's `await using`): the acquisition may have failed
    /// or been released already, and then there is nothing to end, so this does
    /// nothing instead of reporting "not owner".
    pub async fn finish_if_held(&self) -> Result<()> {
        if self.view().is_none() {
            return Ok(());
        }
        self.finish().await
    }

    /// Resets the lease of a lock this owner holds to `ttl` (the lock's own
    /// ttl when `None`); later renewals keep the new lease.
    pub async fn extend(&self, ttl: Option<Duration>) -> Result<()> {
        let lease = match ttl {
            Some(t) => options::lease_duration(OptionName::Ttl, t)?,
            None => self.options.ttl,
        };
        let context = self.context();
        let _request = self.mutexes.request.lock().await;
        let view = self.view();
        let sent = Instant::now();
        let outcome = Box::pin(context.deployment.extend(
            &self.keys,
            &self.owner,
            lease.as_millis() as u64,
            self.options.sync_replicas,
            view.map_or(0, |v| v.fence),
        ))
        .await?;
        match outcome {
            Ok(_) => {
                let drift = context.deployment.drift(lease);
                context
                    .holdings
                    .extended(&self.keys.lock, &self.owner, lease, sent, drift);
                Ok(())
            }
            Err(answer) => {
                let reason =
                    context
                        .holdings
                        .refusal(&self.keys.lock, &self.owner, view.is_some(), answer);
                context.holdings.lose(&self.keys.lock, &self.owner, reason);
                Err(Error::NotOwned {
                    name: self.name.to_string(),
                    reason,
                })
            }
        }
    }

    /// The mutex's state in Redis (one round trip); a read-write lock's or
    /// semaphore's is [`many_holder_state`](Self::many_holder_state).
    pub async fn state(&self) -> Result<LockState> {
        if self.kind.family().is_many_holder() {
            return Err(Error::invalid(
                "state() reads a mutex; a read-write lock's or semaphore's state is many_holder_state()",
            ));
        }
        self.context().deployment.inspect(&self.keys).await
    }

    /// The state of a read-write lock or semaphore in Redis (one round trip).
    pub async fn many_holder_state(&self) -> Result<ManyHolderState> {
        self.context()
            .deployment
            .inspect_many_holder(&self.keys)
            .await
    }

    /// Whether an acquisition of this handle by another owner would wait now:
    /// for a mutex, whether anyone holds it; for a read, whether a writer
    /// does; for a write, whether anyone does; for permits, whether fewer are
    /// free than this handle asks for.
    pub async fn locked(&self) -> Result<bool> {
        if !self.kind.family().is_many_holder() {
            return Ok(self.state().await?.held);
        }
        let state = self.many_holder_state().await?;
        Ok(state.foreign
            || match self.kind {
                Kind::Read => state.holders.iter().any(|h| h.writes()),
                Kind::Permits { size, take } => {
                    state.size.unwrap_or(size).saturating_sub(state.used()) < take
                }
                _ => !state.holders.is_empty(),
            })
    }

    /// Whether this owner holds the lock (asked of Redis, not of local state).
    pub async fn owned(&self) -> Result<bool> {
        if !self.kind.family().is_many_holder() {
            return Ok(self.state().await?.owner.as_deref() == Some(&*self.owner));
        }
        let state = self.many_holder_state().await?;
        Ok(state.holders.iter().any(|h| h.owner == *self.owner))
    }

    /// A write asked by an owner that holds only read (see [`Error::Upgrade`]).
    fn upgrades(&self) -> bool {
        if self.kind != Kind::Write || self.view().is_some() {
            return false;
        }
        let reader = self.as_kind(Kind::Read);
        reader.view().is_some_and(|v| v.lost.is_none())
    }

    /// This owner's fencing token while it holds the lock (lost or not).
    pub fn fencing_token(&self) -> Option<u64> {
        self.view().map(|v| v.fence)
    }

    /// This owner's re-entry depth (0 when not held).
    pub fn count(&self) -> u32 {
        self.view().map_or(0, |v| v.count)
    }

    /// Why this owner's lease ended while held, if it did.
    pub fn lost(&self) -> Option<LostReason> {
        self.view().and_then(|v| v.lost)
    }

    /// Resolves when this owner's current holding is lost (with the reason),
    /// or with `None` when it is released first or nothing is held.
    pub fn lost_signal(&self) -> impl Future<Output = Option<LostReason>> + Send + 'static {
        let rx = self
            .context()
            .holdings
            .lost_watch(&self.keys.lock, &self.owner);
        wait_lost(rx)
    }

    fn view(&self) -> Option<HoldingView> {
        self.context().holdings.view(&self.keys.lock, &self.owner)
    }
}

/// What an acquisition that waited as `wait` allows ended in, said as such:
/// a single attempt that found the lock busy passed no deadline, so its
/// timeout is [`Error::Busy`]. Anything else (a missed Redlock quorum, which
/// says why) is left as it is.
fn said_of(e: Error, wait: Wait) -> Error {
    match e {
        Error::Timeout { name, cause: None } if wait.is_once() => Error::Busy { name },
        other => other,
    }
}

/// The owner id of `unit` of the client `client_id`, for a lock of `kind`.
fn owner_id(client_id: &str, unit: &str, kind: Kind) -> Arc<str> {
    Arc::from(format!("{client_id}:{unit}{}", kind.owner_suffix()))
}

async fn wait_lost(rx: Option<watch::Receiver<Option<LostReason>>>) -> Option<LostReason> {
    let mut rx = rx?;
    // Err: the holding left the table (released) without being lost.
    rx.wait_for(Option::is_some).await.ok().and_then(|r| *r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_single_attempt_that_found_the_lock_held_names_no_deadline() {
        let timeout = |cause: Option<&str>| Error::Timeout {
            name: "report".into(),
            cause: cause.map(str::to_owned),
        };
        for once in [Wait::Once, Wait::For(Duration::ZERO)] {
            let busy = said_of(timeout(None), once);
            assert_eq!(busy.to_string(), "lock \"report\" is held by someone else");
            assert_eq!(busy.category(), "timeout");
        }
        for waited in [Wait::For(Duration::from_secs(1)), Wait::Forever] {
            assert_eq!(
                said_of(timeout(None), waited).to_string(),
                "lock \"report\" was not acquired before the deadline"
            );
        }
        // A missed quorum says why, whatever the wait.
        assert!(matches!(
            said_of(timeout(Some("2 of 3 masters")), Wait::Once),
            Error::Timeout { cause: Some(_), .. }
        ));
    }
}
