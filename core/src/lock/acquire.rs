//! How an acquisition waits, as a state machine: `run` is the algorithm, a
//! loop over named steps (`attempt`, `join_line_if_due`, `sleep`,
//! `take_handoff`), and `Waiter` is what the wait knows between them.
//!
//! A first attempt takes a free lock in one round trip, with no subscription.
//! Once it finds the lock busy, the waiter listens (for release messages, or
//! in line for its handoff) and sleeps until a message comes or the holder's
//! lease would end, attempting again on each wake. A waiter out of line takes
//! a place in line once others stand in it, or once it has waited
//! `queue_after` (a fair waiter at once).

use std::time::Duration;

use tokio::time::Instant;

use super::line::{Grant, Line};
use super::{Acquired, Lock};
use crate::error::{Error, Result};
use crate::options::Wait;
use crate::redis::deployment::Attempt;
use crate::wakeups::registry::{sleep_bound, Handoff, Ticket};

/// Acquires `lock`, waiting as `wait` allows (see [`Lock::acquire`]).
pub(super) async fn run(lock: &Lock, wait: Wait) -> Result<Acquired> {
    let context = lock.context();
    if lock.upgrades() {
        return Err(Error::Upgrade {
            name: lock.name.to_string(),
        });
    }
    let start = Instant::now();
    let deadline = wait.deadline(start);
    // Another wait of this owner (a clone, a handle used twice at once)
    // goes first; this one then re-enters at once if that one got it.
    // A single attempt never stands in line, so it needs no wait mutex.
    let _waiting = match deadline {
        _ if wait.is_once() => None,
        None => Some(lock.mutexes.wait.lock().await),
        Some(d) => Some(
            tokio::time::timeout_at(d, lock.mutexes.wait.lock())
                .await
                .map_err(|_| lock.timeout(None))?,
        ),
    };
    // What an abandoned wait of this owner left to finish (leaving the
    // line, passing on a grant) must not act on this acquisition; a wait
    // also takes back its place left in line (see `waits_again`), under its
    // wait mutex, so nothing a wait before it left acts on its own place.
    if wait.is_once() {
        context
            .waiters
            .cleaned_up(&lock.keys.lock, &lock.owner)
            .await;
    } else {
        let settled = context.waiters.waits_again(&lock.keys.lock, &lock.owner);
        match deadline {
            None => settled.await,
            Some(d) => tokio::time::timeout_at(d, settled)
                .await
                .map_err(|_| lock.timeout(None))?,
        }
    }
    let mut waiter = Waiter::new(lock, wait, start, deadline);
    waiter.join_line_if_listening().await;
    let metrics = &context.telemetry.metrics;
    // The uncontended path: one round trip, no subscription.
    if let Some(acquired) = waiter.attempt().await? {
        metrics.acquired(false, start.elapsed());
        return Ok(acquired);
    }
    if waiter.past_deadline(Instant::now()) {
        metrics.timed_out();
        return Err(waiter.give_up().await);
    }
    waiter.listen().await;
    loop {
        if waiter.attempt_now {
            waiter.join_line_if_due().await;
            if let Some(acquired) = waiter.attempt().await? {
                metrics.acquired(true, start.elapsed());
                return Ok(acquired);
            }
        }
        waiter.attempt_now = true;
        let now = Instant::now();
        if waiter.past_deadline(now) {
            metrics.timed_out();
            return Err(waiter.give_up().await);
        }
        if waiter.due_to_join_line() {
            continue;
        }
        if let Woken::Handed(handoff) = waiter.sleep(now).await {
            if let Some(acquired) = waiter.take_handoff(handoff).await {
                metrics.acquired(true, start.elapsed());
                return Ok(acquired);
            }
        }
    }
}

/// One acquisition that may wait: what it knows between its steps.
struct Waiter<'a> {
    lock: &'a Lock,
    deadline: Option<Instant>,
    fair: bool,
    /// One Redis deployment keeps a waiting line (Redlock has none). Fair
    /// waiters join it at once; the others once they have waited
    /// `queue_after`, or as soon as they hear that others stand in it.
    keeps_line: bool,
    /// This client's waiter channel, where a waiter in line hears of its
    /// handoff. Named at first only when this client listens on some channel
    /// already (the uncontended path builds no string for it); once the
    /// waiter listens, whenever the deployment keeps a line.
    waiter_channel: Option<String>,
    /// When a waiter out of line has waited long enough to take a place in
    /// it. None: never (a span too long to count).
    starving_at: Option<Instant>,
    /// Its client listened on its waiter channel already when it started, so
    /// it stood in line from its very first attempt.
    in_line_now: bool,
    /// The lock's release channel, for a waiter that listens for release
    /// messages.
    release: Option<Ticket>,
    /// Its place in line, while it has one.
    line: Option<Line>,
    busy: Busy,
    /// When this waiter's last attempt in line that found the lock busy
    /// was sent, and the last token issued then: a release that hands the
    /// lock over to it afterwards runs after that attempt, so its lease
    /// started later, and its token is larger (see `confirm_handoff`).
    busy_in_line_since: Option<(Instant, u64)>,
    /// Whether the next round starts with an attempt, or with a sleep.
    attempt_now: bool,
}

/// What the last attempt heard when the lock was busy (see
/// [`Attempt::Busy`]), unpacked in one place: [`Waiter::attempt`].
#[derive(Default)]
struct Busy {
    retry_in_ms: i64,
    cause: Option<String>,
    backoff: bool,
    waiters_in_line: bool,
}

/// What ended a sleep.
enum Woken {
    /// A release handed the lock to this waiter in line.
    Handed(Handoff),
    /// A release message (or a reconnect of the feed).
    Released,
    /// The sleep's bound.
    Timer,
}

impl<'a> Waiter<'a> {
    fn new(lock: &'a Lock, wait: Wait, start: Instant, deadline: Option<Instant>) -> Self {
        let context = lock.context();
        // Waiters of a read-write lock or semaphore always stand in line:
        // whom a release serves is decided there (enough waiters for the
        // permits it frees, every reader up to a writer), and a newcomer
        // passes the line only as the script allows (see `fair` there).
        let fair = lock.options.fair || lock.keys.family.is_many_holder();
        let keeps_line = !context.deployment.is_redlock();
        let waiter_channel = (keeps_line && !wait.is_once() && context.waiters.listens_at_all())
            .then(|| lock.keys.waiter_channel(&context.id));
        let starving_at = start.checked_add(if fair {
            Duration::ZERO
        } else {
            lock.options.queue_after
        });
        // A waiter whose client listens on its waiter channel already
        // (another waiter, or one that just left the line) joins the line
        // with its very first attempt: a looping holder cannot slip in
        // between.
        let in_line_now = waiter_channel
            .as_deref()
            .is_some_and(|c| context.listening(c));
        Waiter {
            lock,
            deadline,
            fair,
            keeps_line,
            waiter_channel,
            starving_at,
            in_line_now,
            release: None,
            line: None,
            busy: Busy::default(),
            busy_in_line_since: None,
            attempt_now: false,
        }
    }

    async fn join_line_if_listening(&mut self) {
        if let (true, Some(channel)) = (self.in_line_now, &self.waiter_channel) {
            self.line = Some(self.lock.join_line(channel, self.deadline).await);
        }
    }

    /// One attempt, which takes a place in line when the waiter is in line:
    /// the lock, or `None` when it was busy.
    async fn attempt(&mut self) -> Result<Option<Acquired>> {
        self.lock.context().refresh_registration();
        let sent = Instant::now();
        match self.lock.attempt(self.line.is_some()).await? {
            Attempt::Held { fence, count } => {
                // Taking the lock took this waiter out of the line.
                if let Some(line) = self.line.take() {
                    line.settled();
                }
                Ok(Some(self.lock.acquired(fence, count)))
            }
            Attempt::Busy {
                retry_in_ms,
                cause,
                backoff,
                waiters_in_line,
                issued,
                ..
            } => {
                if self.line.is_some() {
                    self.busy_in_line_since = Some((sent, issued));
                }
                self.busy = Busy {
                    retry_in_ms,
                    cause,
                    backoff,
                    waiters_in_line,
                };
                Ok(None)
            }
        }
    }

    fn past_deadline(&self, now: Instant) -> bool {
        self.deadline.is_some_and(|d| now >= d)
    }

    /// The deadline passed: leaves the line, with what the wait ends in.
    async fn give_up(&mut self) -> Error {
        if let Some(line) = self.line.take() {
            line.leave().await;
        }
        self.lock.timeout(self.busy.cause.take())
    }

    /// After a first attempt found the lock busy: listens for what may wake
    /// this waiter, and joins the line if it is due to.
    async fn listen(&mut self) {
        let lock = self.lock;
        let keeps_line = self.keeps_line;
        self.waiter_channel = self
            .waiter_channel
            .take()
            .or_else(|| keeps_line.then(|| lock.keys.waiter_channel(&lock.context().id)));
        // Subscribe before the next attempt, so a release that lands between
        // that attempt and the sleep still wakes this waiter. A waiter in
        // line listens on its client's waiter channel, and only then joins
        // the line (a line entry counts as alive while that channel is
        // heard); the others listen for release messages. One that goes
        // straight into line never needs those (and under contention that
        // saves a subscribe and an unsubscribe per acquisition).
        self.release = match self.fair || self.in_line_now || self.busy.waiters_in_line {
            true => None,
            false => Some(
                lock.context()
                    .join(&lock.keys.channel, None, self.deadline)
                    .await,
            ),
        };
        if let (None, Some(channel)) = (&self.line, &self.waiter_channel) {
            if self.fair || self.busy.waiters_in_line {
                self.line = Some(lock.join_line(channel, self.deadline).await);
            }
        }
        // A waiter that was listening during its first attempt missed
        // nothing since, and one backing off has no release to miss: each
        // goes straight to sleep.
        self.attempt_now = !self.in_line_now && !self.busy.backoff;
    }

    /// Releases go to the line with no release message once others stand
    /// in it: a waiter out of line then takes a place in it with its next
    /// attempt, as it does once it has waited long enough.
    fn joins(&self) -> bool {
        self.line.is_none()
            && !self.busy.backoff
            && (self.busy.waiters_in_line || self.starving_at.is_some_and(|t| Instant::now() >= t))
    }

    /// Whether the next attempt is to take a place in line (it is made at
    /// once, then, instead of a sleep).
    fn due_to_join_line(&self) -> bool {
        self.waiter_channel.is_some() && self.joins()
    }

    async fn join_line_if_due(&mut self) {
        if let Some(channel) = &self.waiter_channel {
            if self.joins() {
                self.line = Some(self.lock.join_line(channel, self.deadline).await);
            }
        }
    }

    /// Never a poll: sleeps until a release message (or handoff), or until
    /// the holder's lease would end if that message never comes (or, out of
    /// line, until this waiter starves). A back-off sleeps its delay out.
    async fn sleep(&self, now: Instant) -> Woken {
        let mut bound = if self.busy.backoff {
            now + Duration::from_millis(self.busy.retry_in_ms.max(0) as u64)
        } else {
            now + sleep_bound(self.busy.retry_in_ms, self.lock.options.ttl)
        };
        if self.line.is_none() && self.waiter_channel.is_some() {
            bound = self.starving_at.map_or(bound, |t| bound.min(t));
        }
        let until = self.deadline.map_or(bound, |d| d.min(bound));
        // A waiter in line hears of its turn from its handoff; its waiter
        // channel wakes it only after a reconnect (its entry may have
        // been dropped meanwhile). Release messages are for the others.
        let released = async {
            match (&self.line, &self.release) {
                _ if self.busy.backoff => std::future::pending().await,
                (Some(Line { ticket, .. }), _) | (None, Some(ticket)) => ticket.released().await,
                (None, None) => std::future::pending().await,
            }
        };
        let handed = async {
            match &self.line {
                Some(line) => line.ticket.handed().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            handoff = handed => Woken::Handed(handoff),
            _ = released => {
                tracing::trace!(target: "rlock", lock = %self.lock.name, "woken by release");
                Woken::Released
            }
            _ = tokio::time::sleep_until(until) => Woken::Timer,
        }
    }

    /// A release handed this waiter in line the lock: the lock once the
    /// handoff is confirmed (see `confirm_handoff`), or `None` to wait on.
    async fn take_handoff(&mut self, handoff: Handoff) -> Option<Acquired> {
        let fence = handoff.fence;
        if let Some(line) = self.line.take() {
            line.settled();
        }
        // Passed on if this wait is dropped before it knows
        // whether it holds the grant.
        let grant = Grant {
            lock: Some(self.lock.clone()),
            fence,
        };
        let confirmed = self
            .lock
            .confirm_handoff(handoff, self.busy_in_line_since)
            .await;
        self.lock.took_in_line(fence);
        match confirmed {
            Ok(Some(acquired)) => {
                grant.settle();
                return Some(acquired);
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
                tracing::debug!(target: "rlock", lock = %self.lock.name, error = %e, "handoff not confirmed");
                drop(grant);
                self.busy.cause = Some(e.to_string());
                self.busy.backoff = true;
                self.busy.retry_in_ms = rand::random_range(5..=50);
                self.attempt_now = false;
            }
        }
        self.busy_in_line_since = None;
        None
    }
}
