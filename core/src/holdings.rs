//! What this client holds: every holding sits in one table keyed by (lock
//! key, owner), with its fencing token, its re-entry count and when its lease
//! ends by this client's clock, and tells its holder when it is lost. A holding
//! is marked lost the moment its lease ends by this client's clock without a
//! confirmed renewal, or a renewal finds the key gone or someone else's.
//!
//! The renewal loop (`watchdog.rs`) asks the table what is due and hands it
//! back what Redis answered; the lock operations record what they acquired,
//! extended and released. It also remembers the last releases it reported
//! (`holdings/released.rs`), to tell "already released" from "not acquired".

mod released;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::futures::Notified;
use tokio::sync::{watch, Notify};
use tokio::time::Instant;

use crate::error::{LostReason, NotOwnedReason};
use crate::keys::Keys;
use crate::redis::deployment::Deployment;
use crate::redis::scripts::owner_checked;
use crate::telemetry::Telemetry;
use released::Released;

/// Holdings due within this share of their renewal period are renewed in the
/// same tick, so locks taken at about the same time share round trips.
const BATCH_WINDOW_DIVISOR: u32 = 2;
/// Renewals fewer than this many milliseconds of lease are not worth sending.
const MIN_LEASE_MS: u64 = 1;

/// How a holding Redis refused was lost. Redis answers only `Expired`,
/// `HeldByAnother` and `Forced`; the other reasons are this client's, about
/// holdings it does not have.
fn lost_by(reason: NotOwnedReason) -> LostReason {
    reason.lost().unwrap_or(LostReason::Expired)
}

/// The settings of one holding that the watchdog needs.
#[derive(Debug, Clone)]
pub(crate) struct HoldTerms {
    pub name: Arc<str>,
    pub keys: Arc<Keys>,
    pub owner: Arc<str>,
    pub lease: Duration,
    pub auto_renew: bool,
    pub max_hold: Option<Duration>,
}

struct Holding {
    terms: HoldTerms,
    fence: u64,
    count: u32,
    max_hold_until: Option<Instant>,
    /// The current lease was shortened to end by `max_hold`: no renewal follows.
    capped: bool,
    /// When the lease ends by this client's clock: measured from before the
    /// request that set it, so it never runs later than Redis' own expiry.
    expires_at: Instant,
    next_renew: Instant,
    renewing: bool,
    /// Its last release is on its way: no renewal may go out meanwhile.
    releasing: bool,
    /// A renewal refused while the release was on its way: it may have met
    /// that release (freed on a faster master) or a real loss. The release's
    /// answer tells which (it succeeds only where the lock was still this
    /// owner's on a majority); a release that never answers makes it a loss.
    refused: Option<LostReason>,
    /// Lost, and its last release went unanswered: every scope of it has
    /// ended, so the owner may take the lock afresh (see
    /// [`HoldingView::open_scopes`]).
    abandoned: bool,
    generation: u64,
    lost: watch::Sender<Option<LostReason>>,
    /// When it was granted (for the hold time of its release).
    since: Instant,
    /// Its last renewal was not confirmed (told once until one is).
    renewal_failing: bool,
    telemetry: Arc<Telemetry>,
}

impl Holding {
    fn period(&self) -> Duration {
        self.terms.lease / 3
    }

    fn renewable(&self) -> bool {
        self.terms.auto_renew && self.lost.borrow().is_none() && !self.releasing
    }

    /// The lease the next renewal asks for: capped so a holding never
    /// outlives `max_hold`.
    fn renewal_lease(&self, now: Instant) -> Duration {
        match self.max_hold_until {
            Some(until) => self.terms.lease.min(until.saturating_duration_since(now)),
            None => self.terms.lease,
        }
    }

    fn lose(&mut self, reason: LostReason) {
        if self.lost.borrow().is_none() {
            self.telemetry.lost(&self.terms.name, reason, self.fence);
            self.lost.send_replace(Some(reason));
        }
    }

    /// Why the lease ran out by the clock.
    fn expiry_reason(&self) -> LostReason {
        if !self.terms.auto_renew {
            LostReason::LeaseEnded
        } else if self.capped {
            LostReason::MaxHold
        } else {
            LostReason::Unreachable
        }
    }
}

/// A release on its way, from [`Holdings::releasing`]: what its answer does
/// to the holding it set out to release, and to no other (the same owner may
/// hold the name afresh by the time the answer comes).
pub(crate) struct Releasing<'a> {
    holdings: &'a Holdings,
    key: &'a str,
    owner: &'a str,
    /// The holding being released (its generation), if any.
    generation: Option<u64>,
    /// Whether this release marked it `releasing` (its last acquisition).
    marked: bool,
}

impl Releasing<'_> {
    /// Runs `f` on the holding being released, if it is still there.
    fn with<R>(&self, f: impl FnOnce(&mut Holding) -> R) -> Option<R> {
        let generation = self.generation?;
        let mut table = self.holdings.table.lock().unwrap();
        let h = table.locks.get_mut(self.key)?.get_mut(self.owner)?;
        (h.generation == generation).then(|| f(h))
    }

    /// Redis released it; `remaining` re-entries are left, whose lease runs
    /// from `sent`. A renewal refused meanwhile met this release.
    pub(crate) fn succeeded(
        &self,
        remaining: u32,
        lease: Duration,
        sent: Instant,
        drift: Duration,
    ) {
        if remaining == 0 {
            self.with(|h| h.telemetry.metrics.released(h.since.elapsed()));
            self.forget();
        } else {
            self.with(|h| {
                h.refused = None;
                h.count = remaining;
                h.expires_at = sent + lease - drift;
            });
        }
    }

    /// Redis refused the release of an inner scope (or the holding was lost
    /// already): the `scopes` outside it still believe they hold it, so the
    /// holding stays, lost, and each of them hears of the loss when it ends
    /// rather than finding nothing held.
    pub(crate) fn lost_for(&self, scopes: u32, reason: NotOwnedReason) {
        self.with(|h| {
            h.count = scopes;
            h.lose(lost_by(reason));
        });
    }

    /// Redis said it was not this owner's: renewals for it stop here.
    pub(crate) fn forget(&self) {
        if self.with(|_| ()).is_some() {
            self.holdings.forget(self.key, self.owner);
        }
    }

    /// Redis did not answer: whether the lock was freed is unknown. Renewals
    /// stop, so it is gone by the end of its lease either way, and it counts
    /// as lost until the owner takes it again. A nested release that went
    /// unanswered freed nothing either way: the holding goes on, counted as
    /// if it landed (the re-entries left are returned), and the next
    /// release's view settles it (a count in Redis above that view is taken
    /// as the view, see `release.lua`).
    pub(crate) fn unanswered(&self) -> Option<u32> {
        self.with(|h| {
            if h.count > 1 {
                h.count -= 1;
                Some(h.count)
            } else {
                h.lose(LostReason::Unreachable);
                h.abandoned = true;
                None
            }
        })
        .flatten()
    }
}

impl Drop for Releasing<'_> {
    /// A holding still in the table (a release that left re-entries, or was
    /// dropped before its answer) is renewed again at once, and a refusal
    /// that came meanwhile is a loss.
    fn drop(&mut self) {
        if !self.marked {
            return;
        }
        let wake = self.with(|h| {
            h.releasing = false;
            if let Some(reason) = h.refused.take() {
                h.lose(reason);
            }
            h.next_renew.min(h.expires_at)
        });
        if let Some(at) = wake {
            let table = self.holdings.table.lock().unwrap();
            self.holdings.wake_by(&table, at);
        }
    }
}

/// A holding that `close()` gives back: `count` releases of `owner`.
pub(crate) struct HeldAtClose {
    pub keys: Arc<Keys>,
    pub owner: Arc<str>,
    pub fence: u64,
    pub lease: Duration,
    pub count: u32,
}

/// What one holding looks like to its owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HoldingView {
    pub fence: u64,
    pub count: u32,
    pub lost: Option<LostReason>,
    /// When the lease ends by this client's clock (earlier than in Redis).
    pub expires_at: Instant,
    /// Lost, and its last release went unanswered: no scope of it is open.
    pub abandoned: bool,
    /// Which holding of this owner it is: a later holding of the same
    /// owner on the same lock has another.
    pub generation: u64,
}

impl HoldingView {
    /// Whether some scope of this owner (an acquisition not yet released)
    /// still runs on this holding: a lost holding with open scopes is one
    /// the owner has not been able to end yet.
    pub(crate) fn open_scopes(&self) -> bool {
        !self.abandoned && self.lost != Some(LostReason::Closed)
    }
}

/// One extension the loop sends.
pub(crate) struct Renewal {
    pub(crate) keys: Arc<Keys>,
    pub(crate) owner: Arc<str>,
    pub(crate) lease_ms: u64,
    /// The token of the holding renewed: a renewal names it, so that one
    /// finding it ended by an operator's forced release says so.
    pub(crate) fence: u64,
    /// The lease asked for was shortened to end by `max_hold`.
    capped: bool,
    generation: u64,
}

/// Holdings by lock key, then by owner.
#[derive(Default)]
struct Table {
    locks: HashMap<String, HashMap<Arc<str>, Holding>>,
    /// When the loop will wake next on its own; a change that needs an
    /// earlier wake notifies it, any other change costs it nothing.
    scheduled: Option<Instant>,
    generations: u64,
    /// The client was closed: nothing is renewed or held any more.
    closed: bool,
    released: Released,
}

impl Table {
    fn holdings(&self) -> impl Iterator<Item = &Holding> {
        self.locks.values().flat_map(|o| o.values())
    }
}

/// The table of everything this client holds.
#[derive(Default)]
pub(crate) struct Holdings {
    table: Mutex<Table>,
    /// Wakes the loop when a holding needs it earlier than it planned.
    changed: Notify,
    pub(crate) telemetry: Arc<Telemetry>,
}

impl Holdings {
    pub(crate) fn new(telemetry: Arc<Telemetry>) -> Self {
        Holdings {
            telemetry,
            ..Holdings::default()
        }
    }

    fn with<R>(&self, key: &str, owner: &str, f: impl FnOnce(&mut Holding) -> R) -> Option<R> {
        let mut table = self.table.lock().unwrap();
        table.locks.get_mut(key)?.get_mut(owner).map(f)
    }

    /// Wakes the loop if `at` comes before its planned wake.
    fn wake_by(&self, table: &Table, at: Instant) {
        if table.scheduled.is_none_or(|s| at < s) {
            self.changed.notify_one();
        }
    }

    pub(crate) fn view(&self, key: &str, owner: &str) -> Option<HoldingView> {
        self.with(key, owner, |h| {
            // The loop marks a lapsed lease lost when it wakes; a reader
            // must not hear "held" from a loop that was late (a starved
            // runtime thread) or asleep.
            if h.lost.borrow().is_none() && Instant::now() >= h.expires_at {
                h.lose(h.expiry_reason());
            }
            HoldingView {
                fence: h.fence,
                count: h.count,
                lost: *h.lost.borrow(),
                expires_at: h.expires_at,
                abandoned: h.abandoned,
                generation: h.generation,
            }
        })
    }

    /// The lease a nested release restores: the one the holding runs on (its
    /// acquisition's or its last extend's), never past `max_hold`. `None`
    /// when nothing is held.
    pub(crate) fn current_lease(&self, key: &str, owner: &str) -> Option<Duration> {
        let now = Instant::now();
        self.with(key, owner, |h| {
            h.renewal_lease(now)
                .max(Duration::from_millis(MIN_LEASE_MS))
        })
    }

    pub(crate) fn lost_watch(
        &self,
        key: &str,
        owner: &str,
    ) -> Option<watch::Receiver<Option<LostReason>>> {
        self.with(key, owner, |h| h.lost.subscribe())
    }

    /// Records an acquisition confirmed by Redis; `sent` is when its request left.
    pub(crate) fn acquired(
        &self,
        terms: &HoldTerms,
        fence: u64,
        count: u32,
        sent: Instant,
        drift: Duration,
    ) {
        let mut guard = self.table.lock().unwrap();
        let table = &mut *guard;
        table.generations += 1;
        let generation = table.generations;
        let owners = table.locks.entry(terms.keys.lock.clone()).or_default();
        let fresh = || Holding {
            terms: terms.clone(),
            fence,
            count,
            max_hold_until: terms.max_hold.map(|m| sent + m),
            capped: terms.max_hold.is_some_and(|m| m <= terms.lease),
            expires_at: sent + terms.lease - drift,
            next_renew: sent + terms.lease / 3,
            renewing: false,
            releasing: false,
            refused: None,
            abandoned: false,
            generation,
            lost: watch::channel(None).0,
            since: sent,
            renewal_failing: false,
            telemetry: self.telemetry.clone(),
        };
        let wake = match owners.get_mut(&*terms.owner) {
            Some(h) if h.fence == fence && !h.abandoned => {
                // Re-entry: the same holding, its lease reset by the script.
                // One lost while the request was on its way stays lost: its
                // holder may have heard so already, and its scopes end as
                // one (see `lock/attempt.rs`).
                h.count = count;
                h.expires_at = sent + terms.lease - drift;
                h.next_renew = h.next_renew.min(sent + terms.lease / 3);
                h.next_renew
            }
            Some(h) => {
                *h = fresh();
                h.next_renew
            }
            None => {
                owners
                    .entry(terms.owner.clone())
                    .or_insert_with(fresh)
                    .next_renew
            }
        };
        if table.closed {
            // Granted in the instant the client closed: no renewal or release
            // will follow, so the holder hears at once that it is on its own.
            if let Some(h) = owners.get_mut(&*terms.owner) {
                h.lose(LostReason::Closed);
            }
            return;
        }
        self.wake_by(table, wake.min(sent + terms.lease - drift));
    }

    /// The client is closing: every holding is lost from now on (its holder
    /// is told at once), and none is renewed again. Returns what was held,
    /// for `close()` to give back.
    pub(crate) fn close(&self) -> Vec<HeldAtClose> {
        let mut table = self.table.lock().unwrap();
        table.closed = true;
        let mut held = Vec::new();
        for h in table.locks.values_mut().flat_map(|o| o.values_mut()) {
            h.lose(LostReason::Closed);
            held.push(HeldAtClose {
                keys: h.terms.keys.clone(),
                owner: h.terms.owner.clone(),
                fence: h.fence,
                lease: h.terms.lease,
                count: h.count,
            });
        }
        held
    }

    /// A release that would end the holding is about to be sent: renewals of
    /// it stop until the returned guard is dropped (see [`Releasing`]).
    pub(crate) fn releasing<'a>(&'a self, key: &'a str, owner: &'a str) -> Releasing<'a> {
        let (generation, marked) = self
            .with(key, owner, |h| {
                let mark = h.count == 1 && !h.releasing && h.lost.borrow().is_none();
                if mark {
                    h.releasing = true;
                    h.refused = None;
                }
                (Some(h.generation), mark)
            })
            .unwrap_or((None, false));
        Releasing {
            holdings: self,
            key,
            owner,
            generation,
            marked,
        }
    }

    /// Drops a holding from the table, its release answered: renewals for it
    /// stop here, and the release is remembered (see [`Holdings::refusal`]).
    pub(crate) fn forget(&self, key: &str, owner: &str) {
        let mut table = self.table.lock().unwrap();
        if let Some(owners) = table.locks.get_mut(key) {
            owners.remove(owner);
            if owners.is_empty() {
                table.locks.remove(key);
            }
        }
        table.released.remember(key, owner);
    }

    /// Why `owner` does not hold `key`, Redis having refused a request for
    /// `answer`. When the request was about a holding of this owner's
    /// (`held` when it left), Redis' answer says how that holding ended;
    /// otherwise Redis can only tell that the key is not this owner's, and
    /// this client tells whether the owner released it before.
    pub(crate) fn refusal(
        &self,
        key: &str,
        owner: &str,
        held: bool,
        answer: NotOwnedReason,
    ) -> NotOwnedReason {
        if held {
            answer
        } else if self.table.lock().unwrap().released.contains(key, owner) {
            NotOwnedReason::AlreadyReleased
        } else {
            NotOwnedReason::NotAcquired
        }
    }

    /// Records an extension confirmed by Redis: `lease` is the new lease, kept
    /// for later renewals too.
    pub(crate) fn extended(
        &self,
        key: &str,
        owner: &str,
        lease: Duration,
        sent: Instant,
        drift: Duration,
    ) {
        let mut table = self.table.lock().unwrap();
        let Some(h) = table.locks.get_mut(key).and_then(|o| o.get_mut(owner)) else {
            return;
        };
        h.terms.lease = lease;
        h.expires_at = sent + lease - drift;
        h.next_renew = sent + lease / 3;
        let wake = h.next_renew;
        self.wake_by(&table, wake);
    }

    /// Marks a holding lost now (an extend or release found it gone).
    pub(crate) fn lose(&self, key: &str, owner: &str, reason: NotOwnedReason) {
        self.with(key, owner, |h| h.lose(lost_by(reason)));
    }
}

/// What the renewal loop (`watchdog.rs`) asks of the table, and tells it.
impl Holdings {
    /// Resolves when a holding needs the loop earlier than it planned.
    pub(crate) fn changed(&self) -> Notified<'_> {
        self.changed.notified()
    }

    /// The next instant the loop has work (a renewal or an expiry), which
    /// becomes the loop's plan.
    pub(crate) fn plan_wake(&self) -> Option<Instant> {
        let mut table = self.table.lock().unwrap();
        let next = table
            .holdings()
            .filter(|h| h.lost.borrow().is_none())
            .map(|h| {
                if h.renewable() && !h.renewing {
                    h.expires_at.min(h.next_renew)
                } else {
                    h.expires_at
                }
            })
            .min();
        table.scheduled = next;
        next
    }

    /// Marks lost every holding whose lease ended by the clock.
    pub(crate) fn expire(&self, now: Instant) {
        let mut table = self.table.lock().unwrap();
        for h in table.locks.values_mut().flat_map(|o| o.values_mut()) {
            if h.expires_at <= now && h.lost.borrow().is_none() {
                let reason = h.expiry_reason();
                h.lose(reason);
            }
        }
    }

    /// Collects the renewals due now (and those due soon, to share the trip).
    pub(crate) fn due(&self, now: Instant) -> Vec<Renewal> {
        let mut table = self.table.lock().unwrap();
        let mut batch = Vec::new();
        for owners in table.locks.values_mut() {
            for (owner, h) in owners.iter_mut() {
                if !h.renewable() || h.renewing {
                    continue;
                }
                if h.next_renew > now + h.period() / BATCH_WINDOW_DIVISOR {
                    continue;
                }
                let lease = h.renewal_lease(now);
                let lease_ms = lease.as_millis() as u64;
                if lease_ms < MIN_LEASE_MS {
                    // max_hold reached: stop renewing; the lease runs out.
                    h.capped = true;
                    h.next_renew = h.expires_at;
                    continue;
                }
                h.renewing = true;
                batch.push(Renewal {
                    keys: h.terms.keys.clone(),
                    owner: owner.clone(),
                    lease_ms,
                    fence: h.fence,
                    capped: lease < h.terms.lease,
                    generation: h.generation,
                });
            }
        }
        batch
    }

    /// Applies the outcome of one renewal round trip.
    pub(crate) fn apply(
        &self,
        batch: &[Renewal],
        sent: Instant,
        outcome: &[Option<i64>],
        deployment: &Deployment,
    ) {
        let now = Instant::now();
        let mut table = self.table.lock().unwrap();
        for (i, r) in batch.iter().enumerate() {
            let Some(h) = table
                .locks
                .get_mut(&r.keys.lock)
                .and_then(|o| o.get_mut(&*r.owner))
                .filter(|h| h.generation == r.generation)
            else {
                continue; // released (or replaced) while the renewal was in flight
            };
            h.renewing = false;
            match outcome.get(i).copied().flatten().map(owner_checked) {
                Some(Ok(_)) => {
                    let lease = Duration::from_millis(r.lease_ms);
                    h.capped = r.capped;
                    h.expires_at = sent + lease - deployment.drift(lease);
                    h.next_renew = sent + h.period();
                    h.renewal_failing = false;
                    tracing::trace!(target: "rlock", lock = %h.terms.name, "renewed");
                }
                Some(Err(reason)) if h.releasing => h.refused = Some(lost_by(reason)),
                Some(Err(reason)) => h.lose(lost_by(reason)),
                None => {
                    // Not confirmed (Redis unreachable or slow): try again soon;
                    // the expiry check reports the loss if it never succeeds.
                    let retry = (h.period() / 4)
                        .clamp(Duration::from_millis(10), Duration::from_millis(250));
                    h.next_renew = now + retry;
                    h.telemetry
                        .renewal_failed(&h.terms.name, !h.renewal_failing);
                    h.renewal_failing = true;
                }
            }
        }
    }

    /// When the earliest lease still held ends.
    pub(crate) fn next_expiry(&self) -> Option<Instant> {
        let table = self.table.lock().unwrap();
        table
            .holdings()
            .filter(|h| h.lost.borrow().is_none())
            .map(|h| h.expires_at)
            .min()
    }
}

#[cfg(test)]
mod tests {
    use futures_util::FutureExt;

    use super::*;

    fn holding(holdings: &Holdings, now: Instant) -> HoldTerms {
        let terms = HoldTerms {
            name: "job".into(),
            keys: Arc::new(Keys::new("rlock", "job")),
            owner: "client:1".into(),
            lease: Duration::from_millis(300),
            auto_renew: true,
            max_hold: None,
        };
        holdings.acquired(&terms, 1, 1, now, Duration::ZERO);
        terms
    }

    /// A renewal out when the release of the holding starts, refused by Redis
    /// while the release is on its way: neither a loss yet nor renewed again.
    fn refused_while_releasing<'a>(
        holdings: &'a Holdings,
        terms: &'a HoldTerms,
        now: Instant,
        reply: i64,
    ) -> Releasing<'a> {
        let deployment = Deployment::new(Vec::new(), Vec::new(), Duration::from_millis(200));
        let (key, owner) = (terms.keys.lock.as_str(), &*terms.owner);
        let due = now + terms.lease / 3;
        let in_flight = holdings.due(due);
        assert_eq!(in_flight.len(), 1);
        let releasing = holdings.releasing(key, owner);
        holdings.apply(&in_flight, due, &[Some(reply)], &deployment);
        assert_eq!(holdings.view(key, owner).unwrap().lost, None);
        assert!(holdings.due(due + terms.lease / 3).is_empty());
        releasing
    }

    /// The race a slow release opens: Redis frees the key at once on the
    /// masters that answer, while the release still waits for another; a
    /// renewal meanwhile finds the key gone. That is the release, not a loss,
    /// when the release succeeds.
    #[test]
    fn a_renewal_refused_during_a_release_that_succeeds_is_no_loss() {
        let holdings = Holdings::default();
        let now = Instant::now();
        let terms = holding(&holdings, now);
        let (key, owner) = (terms.keys.lock.as_str(), &*terms.owner);
        let lost = holdings.lost_watch(key, owner).unwrap();
        let releasing = refused_while_releasing(&holdings, &terms, now, -1);
        releasing.succeeded(0, terms.lease, now, Duration::ZERO);
        drop(releasing);
        assert_eq!(holdings.view(key, owner), None, "released");
        assert_eq!(*lost.borrow(), None, "never reported lost");
    }

    /// The same owner may hold the name afresh when an earlier release's
    /// answer comes: that answer is about the earlier holding only.
    #[test]
    fn a_release_answer_leaves_a_newer_holding_alone() {
        let holdings = Holdings::default();
        let now = Instant::now();
        let terms = holding(&holdings, now);
        let (key, owner) = (terms.keys.lock.as_str(), &*terms.owner);
        let releasing = holdings.releasing(key, owner);
        holdings.acquired(&terms, 2, 1, now, Duration::ZERO);
        releasing.succeeded(0, terms.lease, now, Duration::ZERO);
        releasing.forget();
        releasing.unanswered();
        drop(releasing);
        let view = holdings.view(key, owner).expect("the newer holding stays");
        assert_eq!((view.fence, view.lost), (2, None));
        assert_eq!(
            holdings.due(now + terms.lease / 3).len(),
            1,
            "and is renewed"
        );
    }

    /// A release that never answers (dropped, say) leaves the refusal what it
    /// was: a loss. And the loop, which planned only the lease's end while
    /// the release was on its way, is woken to renew again.
    #[test]
    fn a_renewal_refused_during_a_release_that_never_answers_is_a_loss() {
        let holdings = Holdings::default();
        let now = Instant::now();
        let terms = holding(&holdings, now);
        let (key, owner) = (terms.keys.lock.as_str(), &*terms.owner);
        drop(refused_while_releasing(&holdings, &terms, now, -2));
        assert_eq!(
            holdings.view(key, owner).unwrap().lost,
            Some(LostReason::HeldByAnother)
        );

        let other = HoldTerms {
            keys: Arc::new(Keys::new("rlock", "other")),
            ..terms
        };
        holdings.acquired(&other, 2, 1, now, Duration::ZERO);
        let releasing = holdings.releasing(&other.keys.lock, &other.owner);
        let planned = holdings.plan_wake().unwrap();
        assert_eq!(
            planned,
            now + other.lease,
            "only the lease's end while releasing"
        );
        while holdings.changed.notified().now_or_never().is_some() {}
        drop(releasing);
        assert!(
            holdings.changed.notified().now_or_never().is_some(),
            "the loop was not woken to renew again"
        );
        assert_eq!(holdings.due(now + other.lease / 3).len(), 1);
    }

    #[test]
    fn a_nested_release_keeps_the_holding_renewed() {
        let holdings = Holdings::default();
        let now = Instant::now();
        let terms = holding(&holdings, now);
        holdings.acquired(&terms, 1, 2, now, Duration::ZERO);
        let _releasing = holdings.releasing(&terms.keys.lock, &terms.owner);
        assert_eq!(holdings.due(now + Duration::from_millis(100)).len(), 1);
    }
}
