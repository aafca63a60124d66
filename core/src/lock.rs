//! A lock by name: acquire (one attempt, wait with deadline, wait forever),
//! release, extend, and queries. Read top to bottom, this is the algorithm.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{self, Poll};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;
use tracing::Instrument;

use crate::context::{Client, Context};
use crate::error::{Error, LostReason, Result};
use crate::holdings::HoldTerms;
use crate::keys::Keys;
use crate::options::{self, LockOptions, Wait};
use crate::redis::deployment::Attempt;
use crate::redis::endpoint::{AcquireRequest, ReleaseOf};
use crate::redis::scripts::LockState;
use crate::turns::Turn;

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
    /// This owner's turns on this lock: one request and one wait at a time
    /// (see `turns.rs`).
    turn: Turn,
}

impl std::fmt::Debug for Lock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lock")
            .field("name", &self.name)
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
    ) -> Result<Self> {
        options::name(name)?;
        options.check()?;
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
        let keys = Arc::new(Keys::new(&client.context.prefix, name));
        let owner = Arc::from(format!("{}:{unit}", client.context.id));
        let turn = client.context.turns.of(&keys.lock, &owner);
        Ok(Lock {
            client,
            name: Arc::from(name),
            keys,
            owner,
            options,
            turn,
        })
    }

    /// The same lock seen by another owner unit (a binding's thread or task).
    pub fn with_owner(&self, unit: &str) -> Lock {
        self.as_owner(Arc::from(format!("{}:{unit}", self.context().id)))
    }

    /// The same lock seen by the owner with this full id.
    fn as_owner(&self, owner: Arc<str>) -> Lock {
        Lock {
            turn: self.context().turns.of(&self.keys.lock, &owner),
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
    /// [`Error::Timeout`] when the lock stays busy until the deadline.
    pub async fn acquire(&self, wait: Wait) -> Result<Acquired> {
        let span = tracing::debug_span!("acquire", lock = %self.name);
        // Boxed: the waiting state machine is large, and callers nest it in
        // their own futures.
        Box::pin(self.acquire_waiting(wait).instrument(span)).await
    }

    async fn acquire_waiting(&self, wait: Wait) -> Result<Acquired> {
        let context = self.context();
        // What an abandoned wait of this owner left to finish (leaving the
        // line, passing on a grant) must not act on this acquisition.
        context
            .waiters
            .cleaned_up(&self.keys.lock, &self.owner)
            .await;
        let start = Instant::now();
        let deadline = wait.deadline(start);
        // Another wait of this owner (a clone, a handle used twice at once)
        // goes first; this one then re-enters at once if that one got it.
        // A single attempt never stands in line, so it needs no turn.
        let _waiting = match deadline {
            _ if wait.is_once() => None,
            None => Some(self.turn.wait.lock().await),
            Some(d) => Some(
                tokio::time::timeout_at(d, self.turn.wait.lock())
                    .await
                    .map_err(|_| self.timeout(None))?,
            ),
        };
        let fair = self.options.fair;
        // One Redis deployment keeps a waiting line (Redlock has none). Fair
        // waiters join it at once; the others once they have waited
        // `queue_after`, or as soon as they hear that others stand in it.
        let keeps_line = !context.deployment.is_redlock();
        // Named here only when this client listens on some channel already:
        // the uncontended path builds no string for it.
        let waiter_channel = (keeps_line && !wait.is_once() && context.waiters.listens_at_all())
            .then(|| self.keys.waiter_channel(&context.id));
        // None: never (a span too long to count).
        let starving_at = start.checked_add(if fair {
            Duration::ZERO
        } else {
            self.options.queue_after
        });
        // A waiter whose client listens on its waiter channel already
        // (another waiter, or one that just left the line) joins the line
        // with its very first attempt: a looping holder cannot slip in
        // between.
        let in_line_now = waiter_channel
            .as_deref()
            .is_some_and(|c| context.listening(c));
        let mut line = None;
        if let (true, Some(channel)) = (in_line_now, &waiter_channel) {
            line = Some(self.join_line(channel, deadline).await);
        }
        // When this waiter's last attempt in line that found the lock busy
        // was sent, and the last token issued then: a release that hands the
        // lock over to it afterwards runs after that attempt, so its lease
        // started later, and its token is larger (see `confirm_handoff`).
        let mut busy_in_line_since = None;
        // The uncontended path: one round trip, no subscription.
        let sent = Instant::now();
        let (mut retry_in_ms, mut cause, mut backoff, mut queued) =
            match self.attempt(in_line_now).await? {
                Attempt::Held { fence, count } => {
                    if let Some(line) = line.take() {
                        line.settled();
                    }
                    return Ok(self.acquired(fence, count));
                }
                Attempt::Busy {
                    retry_in_ms,
                    cause,
                    backoff,
                    queued,
                    issued,
                    ..
                } => {
                    if in_line_now {
                        busy_in_line_since = Some((sent, issued));
                    }
                    (retry_in_ms, cause, backoff, queued)
                }
            };
        if deadline.is_some_and(|d| Instant::now() >= d) {
            if let Some(line) = line.take() {
                line.leave().await;
            }
            return Err(self.timeout(cause));
        }
        let waiter_channel =
            waiter_channel.or_else(|| keeps_line.then(|| self.keys.waiter_channel(&context.id)));
        // Subscribe before the next attempt, so a release that lands between
        // that attempt and the sleep still wakes this waiter. A waiter in
        // line listens on its client's waiter channel, and only then joins
        // the line (a line entry counts as alive while that channel is
        // heard); the others listen for release messages. One that goes
        // straight into line never needs those (and under contention that
        // saves a subscribe and an unsubscribe per acquisition).
        let release = match fair || in_line_now || queued {
            true => None,
            false => Some(context.join(&self.keys.channel, None, deadline).await),
        };
        if let (None, Some(channel)) = (&line, &waiter_channel) {
            if fair || queued {
                line = Some(self.join_line(channel, deadline).await);
            }
        }
        // A waiter that was listening during its first attempt missed
        // nothing since, and one backing off has no release to miss: each
        // goes straight to sleep.
        let mut attempt_now = !in_line_now && !backoff;
        // Releases go to the line with no release message once others stand
        // in it: a waiter out of line then takes a place in it with its next
        // attempt, as it does once it has waited long enough.
        let joins = |line: &Option<Line>, backoff: bool, queued: bool| {
            line.is_none()
                && !backoff
                && (queued || starving_at.is_some_and(|t| Instant::now() >= t))
        };
        loop {
            if attempt_now {
                if let Some(channel) = &waiter_channel {
                    if joins(&line, backoff, queued) {
                        line = Some(self.join_line(channel, deadline).await);
                    }
                }
                let sent = Instant::now();
                match self.attempt(line.is_some()).await? {
                    Attempt::Held { fence, count } => {
                        // Taking the lock took this waiter out of the line.
                        if let Some(line) = line.take() {
                            line.settled();
                        }
                        return Ok(self.acquired(fence, count));
                    }
                    Attempt::Busy {
                        retry_in_ms: r,
                        cause: c,
                        backoff: b,
                        queued: q,
                        issued,
                        ..
                    } => {
                        if line.is_some() {
                            busy_in_line_since = Some((sent, issued));
                        }
                        retry_in_ms = r;
                        cause = c;
                        backoff = b;
                        queued = q;
                    }
                }
            }
            attempt_now = true;
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                if let Some(line) = line.take() {
                    line.leave().await;
                }
                return Err(self.timeout(cause));
            }
            if waiter_channel.is_some() && joins(&line, backoff, queued) {
                continue;
            }
            // Never a poll: sleep until a release message (or handoff), or
            // until the holder's lease would end if that message never comes
            // (or, out of line, until this waiter starves). A back-off sleeps
            // its delay out.
            let mut bound = if backoff {
                now + Duration::from_millis(retry_in_ms.max(0) as u64)
            } else {
                now + crate::wakeups::registry::sleep_bound(retry_in_ms, self.options.ttl)
            };
            if line.is_none() && waiter_channel.is_some() {
                bound = starving_at.map_or(bound, |t| bound.min(t));
            }
            let until = deadline.map_or(bound, |d| d.min(bound));
            // A waiter in line hears of its turn from its handoff; its waiter
            // channel wakes it only after a reconnect (its entry may have
            // been dropped meanwhile). Release messages are for the others.
            let released = async {
                match (&line, &release) {
                    _ if backoff => std::future::pending().await,
                    (Some(Line { ticket, .. }), _) | (None, Some(ticket)) => {
                        ticket.released().await
                    }
                    (None, None) => std::future::pending().await,
                }
            };
            let handed = async {
                match &line {
                    Some(line) => line.ticket.handed().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                fence = handed => {
                    if let Some(line) = line.take() {
                        line.settled();
                    }
                    // Passed on if this wait is dropped before it knows
                    // whether it holds the grant.
                    let grant = Grant { lock: Some(self.clone()), fence };
                    let confirmed = self.confirm_handoff(fence, busy_in_line_since).await;
                    self.took_in_line(fence);
                    match confirmed {
                        Ok(Some(acquired)) => {
                            grant.settle();
                            return Ok(acquired);
                        }
                        // The grant ended before this waiter could confirm it:
                        // try again at once.
                        Ok(None) => {
                            grant.settle();
                        }
                        Err(e) => {
                            // Given back like an acquisition too few replicas
                            // have (or one Redis did not confirm), in the
                            // background until Redis answers: wait on, after
                            // a pause.
                            tracing::debug!(lock = %self.name, error = %e, "handoff not confirmed");
                            drop(grant);
                            cause = Some(e.to_string());
                            backoff = true;
                            retry_in_ms = rand::random_range(5..=50);
                            attempt_now = false;
                        }
                    }
                    busy_in_line_since = None;
                }
                _ = released => tracing::trace!(lock = %self.name, "woken by release"),
                _ = tokio::time::sleep_until(until) => {}
            }
        }
    }

    /// Listens on this client's waiter channel for a handoff to this owner;
    /// the next attempt made with `enqueue` takes a place in line.
    async fn join_line(&self, channel: &str, deadline: Option<Instant>) -> Line {
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
    fn orphan_handler(&self) -> crate::wakeups::registry::Orphans {
        let client = Arc::downgrade(&self.client.context);
        let lock = (self.name.clone(), self.keys.clone(), self.options.clone());
        Arc::new(move |owner: &str, fence: u64| {
            let Some(context) = client.upgrade() else {
                return;
            };
            let (name, keys, options) = lock.clone();
            let owner: Arc<str> = Arc::from(owner);
            let orphan = Lock {
                turn: context.turns.of(&keys.lock, &owner),
                client: Client { context },
                name,
                keys,
                owner,
                options,
            };
            tracing::debug!(lock = %orphan.name, fence, "handoff to a waiter that left; passing it on");
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
    /// contention) the waiter holds the lock from the message alone;
    /// otherwise, and with `sync_replicas`, it confirms this very grant with
    /// an extension it times itself (one round trip). `Ok(None)`: the grant
    /// had ended.
    async fn confirm_handoff(
        &self,
        fence: u64,
        since: Option<(Instant, u64)>,
    ) -> Result<Option<Acquired>> {
        let context = self.context();
        let lease = self.options.first_lease();
        let replicas = self.options.sync_replicas;
        let _turn = self.turn.request.lock().await;
        if self
            .view()
            .is_some_and(|v| v.fence == fence && v.lost.is_none())
        {
            // A single attempt of this owner took this grant meanwhile: this
            // wait re-enters it with its next attempt instead.
            return Ok(None);
        }
        let now = Instant::now();
        let sent = match since {
            Some((sent, issued))
                if replicas.is_none() && fence > issued && now < sent + lease / 2 =>
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
                    tracing::debug!(lock = %self.name, %reason, "handed a grant that ended");
                    return Ok(None);
                }
                sent
            }
        };
        let drift = context.deployment.drift(lease);
        context
            .holdings
            .acquired(&self.terms(), fence, 1, sent, drift);
        tracing::debug!(lock = %self.name, fence, "handed over");
        Ok(Some(self.acquired(fence, 1)))
    }

    /// [`pass_on`](Self::pass_on) in the background, tried again while Redis
    /// does not answer (the grant would otherwise sit until its lease ends).
    async fn pass_on_persistently(&self, fence: u64) {
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
        let _turn = self.turn.request.lock().await;
        if self.view().is_some_and(|v| v.fence == fence) {
            return Ok(());
        }
        context
            .deployment
            .release(&self.keys, &self.owner, lease, ReleaseOf::grant(fence))
            .await
            .map(|_| ())
    }

    /// One attempt: `Some` when acquired, `None` when someone else holds it.
    pub async fn try_acquire(&self) -> Result<Option<Acquired>> {
        match self.acquire(Wait::Once).await {
            Ok(a) => Ok(Some(a)),
            Err(Error::Timeout { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn acquired(&self, fencing_token: u64, count: u32) -> Acquired {
        tracing::debug!(lock = %self.name, fence = fencing_token, count, "acquired");
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

    /// One acquire round trip, recorded in the holdings table on success.
    /// Cancel-safe: if the caller stops waiting while the request is in
    /// flight, the request still completes and an acquisition it made is
    /// released rather than leaked.
    fn attempt(&self, enqueue: bool) -> FinishOnDrop {
        let lock = self.clone();
        FinishOnDrop {
            fut: Some(Box::pin(async move { lock.attempt_inner(enqueue).await })),
            lock: self.clone(),
            enqueue,
        }
    }

    async fn attempt_inner(&self, enqueue: bool) -> Result<Attempt> {
        let context = self.context();
        let _request = self.turn.request.lock().await;
        let lease = self.options.first_lease();
        let request = AcquireRequest {
            keys: &self.keys,
            owner: &self.owner,
            lease,
            believed: context
                .holdings
                .believed_count(&self.keys.lock, &self.owner),
            enqueue,
            replicas: self.options.sync_replicas,
        };
        let mut sent = Instant::now();
        let mut attempt = context.deployment.acquire(&request).await?;
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
                    let given_back = context
                        .deployment
                        .release(&self.keys, &self.owner, lease_ms, ReleaseOf::grant(fence))
                        .await;
                    if given_back.is_err() {
                        self.clone().clean_up(move |lock| async move {
                            lock.pass_on_persistently(fence).await
                        });
                    }
                    attempt = Attempt::Busy {
                        retry_in_ms: rand::random_range(5..=50),
                        cause: Some(format!("granted, but the reply came after its lease {why}")),
                        backoff: true,
                        queued: false,
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
        if enqueue || context.waiters.listens_at_all() {
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
        let context = self.context();
        let _request = self.turn.request.lock().await;
        // What remains after a nested release keeps the lease this holding
        // runs on, so Redis and the holder agree on when it ends.
        let lease = context
            .holdings
            .current_lease(&self.keys.lock, &self.owner)
            .unwrap_or_else(|| self.options.first_lease());
        // The holder's view, carried by the request so that a resend is
        // recognised (see `ReleaseOf`).
        let of = match context.holdings.view(&self.keys.lock, &self.owner) {
            Some(v) if v.lost.is_none() => ReleaseOf {
                before: i64::from(v.count),
                fence: v.fence,
                last_valid_until: (v.count == 1).then_some(v.expires_at),
            },
            _ => ReleaseOf::ANY,
        };
        let releasing = context.holdings.releasing(&self.keys.lock, &self.owner);
        let sent = Instant::now();
        // Boxed, as in `acquire`: the exchange with Redis is the large part of
        // this future, and the faces move theirs around before polling it.
        let outcome = match Box::pin(context.deployment.release(
            &self.keys,
            &self.owner,
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
                    tracing::warn!(lock = %self.name, error = %e, "nested release unanswered; counted as done");
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
                tracing::debug!(lock = %self.name, remaining, "released");
                Ok(remaining)
            }
            Err(reason) => {
                if of.before > 1 {
                    // An outer scope still believes it holds it: tell it.
                    releasing.lost(reason);
                } else {
                    releasing.forget();
                }
                tracing::debug!(lock = %self.name, %reason, "release refused");
                Err(Error::NotOwned {
                    name: self.name.to_string(),
                    reason,
                })
            }
        }
    }

    /// Ends a scoped holding (a `with` block, `using()`, `rlock exec`): releases,
    /// and reports a lease that ended during the scope as [`Error::Lost`],
    /// which takes precedence over how the release went.
    pub async fn finish(&self) -> Result<()> {
        let lost = self.lost();
        let released = self.release().await;
        let reason = match (lost, &released) {
            (Some(reason), _) => reason,
            (None, Err(Error::NotOwned { reason, .. })) => (*reason).into(),
            (None, _) => return released.map(|_| ()),
        };
        Err(Error::Lost {
            name: self.name.to_string(),
            reason,
        })
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
            Some(t) => options::lease_duration("ttl", t)?,
            None => self.options.ttl,
        };
        let context = self.context();
        let _request = self.turn.request.lock().await;
        let sent = Instant::now();
        let outcome = Box::pin(context.deployment.extend(
            &self.keys,
            &self.owner,
            lease.as_millis() as u64,
            self.options.sync_replicas,
            self.view().map_or(0, |v| v.fence),
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
            Err(reason) => {
                context.holdings.lose(&self.keys.lock, &self.owner, reason);
                Err(Error::NotOwned {
                    name: self.name.to_string(),
                    reason,
                })
            }
        }
    }

    /// The lock's state in Redis (one round trip).
    pub async fn state(&self) -> Result<LockState> {
        self.context().deployment.inspect(&self.keys).await
    }

    /// Whether anyone holds the lock.
    pub async fn locked(&self) -> Result<bool> {
        Ok(self.state().await?.held)
    }

    /// Whether this owner holds the lock (asked of Redis, not of local state).
    pub async fn owned(&self) -> Result<bool> {
        Ok(self.state().await?.owner.as_deref() == Some(&*self.owner))
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

    fn view(&self) -> Option<crate::holdings::HoldingView> {
        self.context().holdings.view(&self.keys.lock, &self.owner)
    }
}

async fn wait_lost(rx: Option<watch::Receiver<Option<LostReason>>>) -> Option<LostReason> {
    let mut rx = rx?;
    // Err: the holding left the table (released) without being lost.
    rx.wait_for(Option::is_some).await.ok().and_then(|r| *r)
}

/// A waiter in line: where its handoff arrives, and its entry.
struct Line {
    ticket: crate::wakeups::registry::Ticket,
    spot: InLine,
}

impl Line {
    fn settled(self) {
        self.spot.settled();
    }

    async fn leave(self) {
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
struct Grant {
    lock: Option<Lock>,
    fence: u64,
}

impl Grant {
    /// The wait holds the grant, or it had ended: nothing to pass on.
    fn settle(mut self) {
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
    /// This owner, in line, learnt of a grant to it other than from its
    /// handoff message (it took it, or gave it back at once), which may still
    /// be on its way or read already: that message is then stale, not a new
    /// grant.
    fn took_in_line(&self, fence: u64) {
        let context = self.context();
        context
            .waiters
            .took(&self.keys.waiter_channel(&context.id), &self.owner, fence);
    }

    /// Runs `work` in the background as a clean-up of this owner's: its next
    /// acquisition of this lock waits for it, so none of it acts on that.
    fn clean_up<F, Fut>(self, work: F)
    where
        F: FnOnce(Lock) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let context = self.context();
        let cleanup = context.waiters.cleanup(&self.keys.lock, &self.owner);
        let runtime = context.runtime().clone();
        let work = work(self);
        runtime.spawn(async move {
            work.await;
            drop(cleanup);
        });
    }

    async fn leave_line(&self) {
        // A closed client has no line left to leave: its waiter channel went
        // with its connections.
        if let Err(e) = self.dequeue().await {
            if matches!(e, Error::Closed) {
                return;
            }
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
        match context.deployment.dequeue(&self.keys, &self.owner).await {
            Ok(Some(fence)) => {
                tracing::debug!(lock = %self.name, "handed over while leaving; passing it on");
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
                tracing::debug!(lock = %self.name, error = %e, "leaving the line failed");
                Err(e)
            }
        }
    }
}

/// The pauses before each new try of a clean-up in the background (leaving
/// the line, passing on a grant) that Redis did not answer.
const RETRY_PAUSES: [Duration; 4] = [
    Duration::from_millis(50),
    Duration::from_millis(200),
    Duration::from_millis(1000),
    Duration::from_millis(5000),
];

type AttemptFuture = Pin<Box<dyn Future<Output = Result<Attempt>> + Send>>;

/// An acquire request that, if dropped before it completes, is driven to
/// completion in the background and released if it acquired.
struct FinishOnDrop {
    fut: Option<AttemptFuture>,
    lock: Lock,
    /// The attempt may put this owner in line.
    enqueue: bool,
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
            let enqueue = self.enqueue;
            self.lock.clone().clean_up(move |lock| async move {
                match fut.await {
                    Ok(Attempt::Held { .. }) => {
                        tracing::debug!(lock = %lock.name, "acquired after cancellation; releasing");
                        let _ = lock.release().await;
                    }
                    // Sent again after a lost reply, it may have put this
                    // owner back in line after its wait left it.
                    Ok(Attempt::Busy { .. }) if enqueue => lock.leave_line().await,
                    _ => {}
                }
            });
        }
    }
}
