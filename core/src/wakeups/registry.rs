//! Waiting for a lock: the registry of waiting channels, and the one place
//! that decides whom a release message wakes.
//!
//! A waiter joins the release channel of its lock before its second attempt
//! (so a release between that attempt and its sleep is never missed), then
//! sleeps until a release message or the holder's remaining lease, whichever
//! comes first. Waiters of one client share one subscription per channel (per
//! feed: one feed per Redis endpoint, see `feed.rs`), and a message wakes
//! exactly one of them (`Notify::notify_one`): the others sleep on, so a
//! handoff costs one attempt per client, not one per waiting thread.
//!
//! Waiters in line (fair ones at once, the others once they have waited
//! `queue_after` or hear that others stand in line) wait on their client's
//! waiter channel instead: a release hands the lock to the first live waiter
//! in line and names it in a `handoff` message, which goes to exactly that
//! waiter, who then holds the lock without another round trip.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::Rng;
use tokio::sync::{mpsc, watch, Notify};

/// How long a joining waiter waits for the SUBSCRIBE confirmations before it
/// relies on its lease-bounded sleep alone (Redis may be down).
const SUBSCRIBE_WAIT: Duration = Duration::from_millis(1000);
/// How long a waiter channel stays subscribed after its last waiter
/// left: a holder that loops acquire/release joins the line again with its
/// very first attempt (the line only counts subscribed clients), instead of
/// leaving a gap in which the lock could be handed back to it.
const FAIR_LINGER: Duration = Duration::from_secs(2);
/// How many grants per channel `Channel::taken` remembers: a handoff message
/// is read long before that many later grants.
const TAKEN_KEPT: usize = 64;
/// The pause before a give-back message wakes a waiter, doubled by each
/// give-back up to the most, back to the first by any other message.
const GIVE_BACK_PAUSE_FIRST: Duration = Duration::from_millis(100);
const GIVE_BACK_PAUSE_MOST: Duration = Duration::from_secs(10);

/// The waiters of one channel in one client.
struct Channel {
    waiters: usize,
    wake: Arc<Notify>,
    /// How many feeds have confirmed the subscription.
    confirmed: watch::Sender<usize>,
    /// Waiters in line by owner id: where a handoff goes.
    handoffs: HashMap<String, watch::Sender<Option<Handoff>>>,
    /// Grants that waiters in line learnt of other than from their handoff
    /// message (an attempt of their own, or leaving the line), as owner id
    /// and token, newest last: that message may still come, and must not
    /// reach the owner's next wait.
    taken: VecDeque<(String, u64)>,
    /// Counts the times the channel went idle, so a delayed unsubscribe only
    /// acts on the idle spell that scheduled it.
    idle_spells: u64,
    /// Passes on a handoff to an owner no longer in line here.
    orphans: Option<Orphans>,
    /// Counts every message on the channel (and every time messages may
    /// have been lost): what callers waiting for a cache entry's rebuild
    /// watch, every one of them woken by each message.
    news: watch::Sender<u64>,
    /// How long the next give-back message waits before it wakes a waiter
    /// (see `Waiters::given_back`).
    give_back_pause: Duration,
}

/// A release (or an attempt that found the lock free) handed the lock to a
/// waiter in line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Handoff {
    pub(crate) fence: u64,
    /// The lease Redis set, in ms (None from a build whose message did not
    /// carry it).
    pub(crate) lease_ms: Option<u64>,
}

/// Called with the owner id and token of a handoff that reached no waiter:
/// the grant must be passed on, not left to run out.
pub(crate) type Orphans = Arc<dyn Fn(&str, u64) + Send + Sync>;

/// The registry of waiting channels, shared with the feed tasks.
pub(crate) struct Waiters {
    channels: Mutex<HashMap<String, Channel>>,
    /// One per feed task: asks it to bring a channel's subscription in line
    /// with the registry (subscribe when it has waiters, unsubscribe when not).
    feeds: Mutex<Vec<mpsc::UnboundedSender<String>>>,
    /// What abandoned waits leave behind (see `Cleanups`).
    cleanups: Mutex<Cleanups>,
    runtime: tokio::runtime::Handle,
}

/// What abandoned waits of this client leave behind, under one lock so that
/// an owner that waits again never meets a request still taking it out of
/// line.
#[derive(Default)]
struct Cleanups {
    /// Clean-ups still running (leaving the line, an attempt finishing in
    /// the background, a request taking a left owner out of line), counted by
    /// lock key and owner: that owner's next acquisition of that lock starts
    /// once they are done, so none of them acts on it (releasing what the new
    /// wait was handed, or taking it out of line).
    running: HashMap<(String, String), watch::Sender<usize>>,
    /// Owners that left a lock's line (by lock key) whose dequeue was never
    /// confirmed: their entry would look alive while this client has other
    /// waiters on that name, so the client's next attempt on it takes them
    /// out first (`acquire.lua`'s drop_left).
    left: HashMap<String, Vec<String>>,
}

/// Owners an attempt takes out of the line before anything else, and the
/// clean-ups that keep each of them from waiting again until it is answered.
pub(crate) struct Left {
    pub(crate) owners: Vec<String>,
    _running: Vec<Cleanup>,
}

/// One running clean-up (see `Cleanups::running`); done when dropped.
pub(crate) struct Cleanup {
    waiters: Arc<Waiters>,
    key: (String, String),
}

/// A waiter's membership of one channel; leaving is dropping it.
pub(crate) struct Ticket {
    waiters: Arc<Waiters>,
    channel: String,
    wake: Arc<Notify>,
    /// Waiters in line: the owner id and where its handoff arrives.
    handoff: Option<(String, watch::Receiver<Option<Handoff>>)>,
    /// See `Channel::news`.
    news: watch::Receiver<u64>,
}

impl Waiters {
    pub(crate) fn new(runtime: tokio::runtime::Handle) -> Arc<Self> {
        Arc::new(Waiters {
            channels: Mutex::new(HashMap::new()),
            feeds: Mutex::new(Vec::new()),
            cleanups: Mutex::new(Cleanups::default()),
            runtime,
        })
    }

    /// Whether every feed is subscribed to `channel` right now.
    pub(crate) fn is_subscribed(&self, channel: &str) -> bool {
        let feeds = self.feeds.lock().unwrap().len();
        let channels = self.channels.lock().unwrap();
        feeds > 0
            && channels
                .get(channel)
                .is_some_and(|c| *c.confirmed.borrow() >= feeds)
    }

    /// Registers a feed task; returns the receiver of its channel requests.
    /// (The feed tasks are spawned on the client's first join, see
    /// `Context::join`.)
    pub(crate) fn add_feed(&self) -> mpsc::UnboundedReceiver<String> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.feeds.lock().unwrap().push(tx);
        rx
    }

    /// Joins `channel`, subscribing every feed when this is its first waiter,
    /// and returns once a majority of feeds confirmed (or after a bounded wait
    /// when Redis does not answer: the waiter's sleeps are bounded by the
    /// holder's lease anyway; and never after `deadline`). A waiter in line
    /// joins its waiter channel with its owner id (`fair_owner`), by which
    /// its handoff reaches it.
    pub(crate) async fn join(
        self: &Arc<Self>,
        channel: &str,
        fair_owner: Option<&str>,
        deadline: Option<tokio::time::Instant>,
    ) -> Ticket {
        let feeds = self.feeds.lock().unwrap().len();
        let (wake, mut confirmed, handoff, news) = {
            let mut channels = self.channels.lock().unwrap();
            let fresh = !channels.contains_key(channel);
            let entry = channels
                .entry(channel.to_owned())
                .or_insert_with(|| Channel {
                    waiters: 0,
                    wake: Arc::new(Notify::new()),
                    confirmed: watch::channel(0).0,
                    handoffs: HashMap::new(),
                    taken: VecDeque::new(),
                    idle_spells: 0,
                    orphans: None,
                    news: watch::channel(0).0,
                    give_back_pause: GIVE_BACK_PAUSE_FIRST,
                });
            entry.waiters += 1;
            let handoff = fair_owner.map(|owner| {
                let (tx, rx) = watch::channel(None);
                entry.handoffs.insert(owner.to_owned(), tx);
                (owner.to_owned(), rx)
            });
            if fresh {
                // Sent under the registry lock, so subscribe and unsubscribe
                // requests reach each feed in the order the entries changed.
                self.tell_feeds(channel);
            }
            let news = entry.news.subscribe();
            (
                entry.wake.clone(),
                entry.confirmed.subscribe(),
                handoff,
                news,
            )
        };
        // A majority of feeds will do (Redlock: a master may be down), and
        // never past the waiter's own deadline.
        let needed = feeds / 2 + 1;
        let until = tokio::time::Instant::now() + SUBSCRIBE_WAIT;
        let until = deadline.map_or(until, |d| d.min(until));
        // Made before waiting: a join dropped meanwhile still leaves.
        let ticket = Ticket {
            waiters: self.clone(),
            channel: channel.to_owned(),
            wake,
            handoff,
            news,
        };
        let _ = tokio::time::timeout_at(until, confirmed.wait_for(|n| *n >= needed)).await;
        ticket
    }

    fn tell_feeds(&self, channel: &str) {
        for feed in self.feeds.lock().unwrap().iter() {
            let _ = feed.send(channel.to_owned());
        }
    }

    /// A message arrived on `channel`. A release wakes one of its waiters
    /// (when none is asleep right now, the wake is kept for the next one to
    /// sleep, so a waiter busy with an attempt does not miss it); a handoff
    /// (`handoff <fence> <lease ms> <owner>`) goes to the waiter in line it
    /// names.
    pub(crate) fn deliver(&self, channel: &str, payload: &[u8]) {
        let mut channels = self.channels.lock().unwrap();
        let Some(c) = channels.get_mut(channel) else {
            return;
        };
        if payload.starts_with(b"given back ") {
            self.given_back(c);
            return;
        }
        c.give_back_pause = GIVE_BACK_PAUSE_FIRST;
        c.news.send_modify(|n| *n += 1);
        let Some((handoff, owner)) = parse_handoff(payload) else {
            c.wake.notify_one();
            return;
        };
        let fence = handoff.fence;
        if let Some(i) = c.taken.iter().position(|(o, f)| o == owner && *f == fence) {
            c.taken.remove(i);
            tracing::debug!(target: "rlock", owner, fence, "stale handoff: that grant was taken already");
            return;
        }
        match (c.handoffs.get(owner), &c.orphans) {
            (Some(slot), _) => {
                slot.send_replace(Some(handoff));
            }
            // That waiter already left. Its dequeue passes on a grant it
            // finds, but it may have failed, or run before this release:
            // the grant is passed on here too (by its token, so twice is
            // harmless and no later holding of that owner is touched).
            (None, Some(orphans)) => orphans(owner, fence),
            (None, None) => {
                tracing::debug!(target: "rlock", owner, "handoff for a waiter that left")
            }
        }
    }

    /// A Redlock attempt that fell short gave back a master's grant (`given
    /// back <client id>`). The lock's holder keeps its majority, unless that
    /// grant was what made a majority look busy to a waiter asleep on it:
    /// so one waiter tries again, but after a pause that doubles while
    /// give-backs keep coming. Waking at once, waiters of two clients each
    /// woken by the other's give-back polled each other for the whole
    /// holding; never waking, a waiter slept through a majority that such a
    /// give-back had freed.
    fn given_back(&self, c: &mut Channel) {
        let pause = c.give_back_pause;
        c.give_back_pause = (pause * 2).min(GIVE_BACK_PAUSE_MOST);
        let pause = rand::rng().random_range(pause / 2..=pause);
        let wake = c.wake.clone();
        self.runtime.spawn(async move {
            tokio::time::sleep(pause).await;
            wake.notify_one();
        });
    }

    /// Sets how `channel` passes on handoffs to owners no longer in line,
    /// unless it has that already.
    pub(crate) fn on_orphan(&self, channel: &str, make: impl FnOnce() -> Orphans) {
        if let Some(c) = self.channels.lock().unwrap().get_mut(channel) {
            if c.orphans.is_none() {
                c.orphans = Some(make());
            }
        }
    }

    /// `owner`, in line on `channel`, learnt of the grant with token `fence`
    /// other than from its handoff message (see `Channel::taken`): it took
    /// it, or gave it back at once. A handoff message of it that was read
    /// already is forgotten too.
    pub(crate) fn took(&self, channel: &str, owner: &str, fence: u64) {
        if let Some(c) = self.channels.lock().unwrap().get_mut(channel) {
            let heard = c.handoffs.get(owner).is_some_and(|slot| {
                slot.send_if_modified(|h| {
                    let heard = h.is_some_and(|h| h.fence == fence);
                    if heard {
                        *h = None;
                    }
                    heard
                })
            });
            // Its message was read already: it will not come again.
            if heard {
                return;
            }
            if c.taken.len() == TAKEN_KEPT {
                c.taken.pop_front();
            }
            c.taken.push_back((owner.to_owned(), fence));
        }
    }

    /// Counts a clean-up of `owner`'s abandoned wait on lock `key` until the
    /// returned guard is dropped.
    pub(crate) fn cleanup(self: &Arc<Self>, key: &str, owner: &str) -> Cleanup {
        let key = (key.to_owned(), owner.to_owned());
        Self::count_cleanup(&mut self.cleanups.lock().unwrap(), &key);
        Cleanup {
            waiters: self.clone(),
            key,
        }
    }

    fn count_cleanup(cleanups: &mut Cleanups, key: &(String, String)) {
        cleanups
            .running
            .entry(key.clone())
            .or_insert_with(|| watch::channel(0).0)
            .send_modify(|n| *n += 1);
    }

    /// Returns once no clean-up of `owner`'s on lock `key` is running.
    pub(crate) async fn cleaned_up(&self, key: &str, owner: &str) {
        let running = {
            let cleanups = self.cleanups.lock().unwrap();
            if cleanups.running.is_empty() {
                return;
            }
            cleanups
                .running
                .get(&(key.to_owned(), owner.to_owned()))
                .map(watch::Sender::subscribe)
        };
        if let Some(mut running) = running {
            // Closed: the last one ended and took its entry away.
            let _ = running.wait_for(|n| *n == 0).await;
        }
    }

    /// Returns once no clean-up of an abandoned wait is running, whoever's.
    pub(crate) async fn settled(&self) {
        loop {
            let running: Vec<watch::Receiver<usize>> = {
                let cleanups = self.cleanups.lock().unwrap();
                cleanups.running.values().map(|r| r.subscribe()).collect()
            };
            if running.is_empty() {
                return;
            }
            for mut r in running {
                // Closed: that one ended and took its entry away.
                let _ = r.wait_for(|n| *n == 0).await;
            }
        }
    }

    /// `owner` left the line of lock `key`, and Redis did not confirm it.
    pub(crate) fn left_unconfirmed(&self, key: &str, owner: &str) {
        let mut cleanups = self.cleanups.lock().unwrap();
        let left = cleanups.left.entry(key.to_owned()).or_default();
        if !left.iter().any(|o| o == owner) {
            left.push(owner.to_owned());
        }
    }

    /// Redis answered a request that took `owners` out of the line of lock
    /// `key` (a dequeue, or an attempt carrying them).
    pub(crate) fn left_confirmed(&self, key: &str, owners: &[impl AsRef<str>]) {
        let mut cleanups = self.cleanups.lock().unwrap();
        if let Some(left) = cleanups.left.get_mut(key) {
            left.retain(|o| !owners.iter().any(|gone| gone.as_ref() == o));
            if left.is_empty() {
                cleanups.left.remove(key);
            }
        }
    }

    /// The owners an attempt on lock `key` takes out of its line first; each
    /// counts as a clean-up of that owner's until the attempt is answered.
    pub(crate) fn left_owners(self: &Arc<Self>, key: &str) -> Left {
        let mut cleanups = self.cleanups.lock().unwrap();
        let owners = match cleanups.left.get(key) {
            Some(left) => left.clone(),
            None => Vec::new(),
        };
        let running = owners
            .iter()
            .map(|owner| {
                let key = (key.to_owned(), owner.clone());
                Self::count_cleanup(&mut cleanups, &key);
                Cleanup {
                    waiters: self.clone(),
                    key,
                }
            })
            .collect();
        Left {
            owners,
            _running: running,
        }
    }

    /// `owner` waits on lock `key` again (under its wait mutex: no other wait of
    /// it leaves the line meanwhile). Its entry left in line, if any, is its
    /// place again: no request sent from now on takes it out, and this
    /// returns once what was sent already is done (an attempt that carried
    /// it, its earlier wait's leaving tried again in the background; one of
    /// those that fails puts it back on the list, so the list is read again).
    pub(crate) async fn waits_again(&self, key: &str, owner: &str) {
        loop {
            let running = {
                let mut cleanups = self.cleanups.lock().unwrap();
                if cleanups.left.is_empty() && cleanups.running.is_empty() {
                    return;
                }
                if let Some(left) = cleanups.left.get_mut(key) {
                    left.retain(|o| o != owner);
                    if left.is_empty() {
                        cleanups.left.remove(key);
                    }
                }
                cleanups
                    .running
                    .get(&(key.to_owned(), owner.to_owned()))
                    .map(watch::Sender::subscribe)
            };
            let Some(mut running) = running else {
                return;
            };
            // Closed: the last one ended and took its entry away.
            let _ = running.wait_for(|n| *n == 0).await;
        }
    }

    /// Channels that have waiters: what every feed must be subscribed to.
    pub(crate) fn wanted(&self) -> Vec<String> {
        self.channels.lock().unwrap().keys().cloned().collect()
    }

    /// Whether any channel has waiters (or lingers after them).
    pub(crate) fn listens_at_all(&self) -> bool {
        !self.channels.lock().unwrap().is_empty()
    }

    pub(crate) fn has_waiters(&self, channel: &str) -> bool {
        self.channels.lock().unwrap().contains_key(channel)
    }

    /// A feed confirmed (`up`) or lost (not `up`) its subscription to
    /// `channel`.
    pub(crate) fn confirm(&self, channel: &str, up: bool) {
        if let Some(c) = self.channels.lock().unwrap().get(channel) {
            c.confirmed.send_modify(|n| {
                *n = if up { *n + 1 } else { n.saturating_sub(1) };
            });
        }
    }

    /// After a feed reconnects, messages sent meanwhile may be lost: wake
    /// every waiter of every channel so each re-checks.
    pub(crate) fn wake_all_channels(&self) {
        for c in self.channels.lock().unwrap().values() {
            Self::wake_every_waiter(c);
        }
    }

    /// A channel was subscribed again (a sharded feed after a reconnect or a
    /// slot move): messages sent meanwhile may be lost, so all its waiters
    /// re-check.
    pub(crate) fn resubscribed(&self, channel: &str) {
        if let Some(c) = self.channels.lock().unwrap().get(channel) {
            Self::wake_every_waiter(c);
        }
    }

    fn wake_every_waiter(c: &Channel) {
        // Every waiter: a line entry of each may have been dropped while its
        // client was not heard. One more wake is kept for a waiter busy with
        // an attempt right now.
        c.wake.notify_waiters();
        c.wake.notify_one();
        c.news.send_modify(|n| *n += 1);
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let mut cleanups = self.waiters.cleanups.lock().unwrap();
        if let Some(running) = cleanups.running.get(&self.key) {
            running.send_modify(|n| *n -= 1);
            if *running.borrow() == 0 {
                cleanups.running.remove(&self.key);
            }
        }
    }
}

/// `handoff <fence> <lease ms> <owner>`, or `handoff <fence> <owner>` from a
/// build whose message did not carry the lease (an owner id is never a
/// number: it starts with its client's UUID).
fn parse_handoff(payload: &[u8]) -> Option<(Handoff, &str)> {
    let text = std::str::from_utf8(payload)
        .ok()?
        .strip_prefix("handoff ")?;
    let (fence, rest) = text.split_once(' ')?;
    let fence = fence.parse().ok()?;
    let (lease_ms, owner) = match rest.split_once(' ') {
        Some((lease, owner)) if lease.bytes().all(|b| b.is_ascii_digit()) => {
            (Some(lease.parse().ok()?), owner)
        }
        _ => (None, rest),
    };
    Some((Handoff { fence, lease_ms }, owner))
}

impl Ticket {
    /// Resolves on a release message for this channel (or a reconnect).
    pub(crate) async fn released(&self) {
        self.wake.notified().await
    }

    /// Every message on this channel from now on (or a reconnect that may
    /// have lost some), as a counter that changes: a caller takes it before
    /// it reads what a message would announce, so none is missed between.
    pub(crate) fn news(&self) -> watch::Receiver<u64> {
        let mut news = self.news.clone();
        news.mark_unchanged();
        news
    }

    /// A waiter in line: resolves with the handoff when a release handed it
    /// the lock (never resolves for a waiter that is not in line).
    pub(crate) async fn handed(&self) -> Handoff {
        match &self.handoff {
            Some((_, rx)) => {
                let mut rx = rx.clone();
                let handoff = match rx.wait_for(Option::is_some).await {
                    Ok(handoff) => *handoff,
                    Err(_) => None,
                };
                match handoff {
                    Some(handoff) => handoff,
                    None => std::future::pending().await,
                }
            }
            None => std::future::pending().await,
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut channels = self.waiters.channels.lock().unwrap();
        if let Some(entry) = channels.get_mut(&self.channel) {
            if let Some((owner, _)) = &self.handoff {
                entry.handoffs.remove(owner);
            }
            entry.waiters -= 1;
            if entry.waiters > 0 {
                return;
            }
            if self.handoff.is_none() {
                channels.remove(&self.channel);
                self.waiters.tell_feeds(&self.channel);
                return;
            }
            entry.idle_spells += 1;
            let spell = entry.idle_spells;
            let waiters = Arc::downgrade(&self.waiters);
            let channel = self.channel.clone();
            self.waiters.runtime.spawn(async move {
                tokio::time::sleep(FAIR_LINGER).await;
                if let Some(w) = waiters.upgrade() {
                    w.unsubscribe_if_idle(&channel, spell);
                }
            });
        }
    }
}

impl Waiters {
    fn unsubscribe_if_idle(&self, channel: &str, spell: u64) {
        let mut channels = self.channels.lock().unwrap();
        if channels
            .get(channel)
            .is_some_and(|c| c.waiters == 0 && c.idle_spells == spell)
        {
            channels.remove(channel);
            self.tell_feeds(channel);
        }
    }
}

/// A sleep bound from the holder's remaining lease: the lease plus a little
/// jitter, so waiters of many clients do not all retry in the same instant
/// when a crashed holder's lease ends. `pttl_ms` -1 (no expiry, a foreign key)
/// falls back to `fallback`.
pub(crate) fn sleep_bound(pttl_ms: i64, fallback: Duration) -> Duration {
    let base = match pttl_ms {
        -1 => fallback,
        ms if ms < 0 => Duration::ZERO,
        ms => Duration::from_millis(ms as u64),
    };
    let spread = (base / 20).clamp(Duration::from_millis(1), Duration::from_millis(50));
    base + rand::rng().random_range(Duration::ZERO..=spread)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_handoff_overtaken_by_the_waiters_own_attempt_reaches_no_later_wait() {
        let waiters = Waiters::new(tokio::runtime::Handle::current());
        let now = Some(tokio::time::Instant::now());
        let first = waiters.join("w", Some("c:1"), now).await;
        // Its attempt found the lock handed to it, with token 7.
        waiters.took("w", "c:1", 7);
        drop(first);
        let again = waiters.join("w", Some("c:1"), now).await;
        // The message of that grant, read late.
        waiters.deliver("w", b"handoff 7 500 c:1");
        let early = tokio::time::timeout(Duration::ZERO, again.handed()).await;
        assert!(early.is_err(), "granted by a stale handoff: {early:?}");
        waiters.deliver("w", b"handoff 8 500 c:1");
        let handed = again.handed().await;
        assert_eq!(
            handed,
            Handoff {
                fence: 8,
                lease_ms: Some(500)
            }
        );
    }

    #[test]
    fn a_handoff_names_its_token_lease_and_owner_and_one_of_an_earlier_build_its_token_and_owner() {
        let (handoff, owner) = parse_handoff(b"handoff 12 60000 f0e1-c2:7 x").unwrap();
        assert_eq!(
            (handoff.fence, handoff.lease_ms, owner),
            (12, Some(60000), "f0e1-c2:7 x")
        );
        let (handoff, owner) = parse_handoff(b"handoff 12 f0e1-c2:7").unwrap();
        assert_eq!(
            (handoff.fence, handoff.lease_ms, owner),
            (12, None, "f0e1-c2:7")
        );
        assert!(parse_handoff(b"released").is_none());
        assert!(parse_handoff(b"handoff x 1 o").is_none());
    }

    #[tokio::test]
    async fn a_channel_subscribed_again_wakes_every_waiter_of_it() {
        let waiters = Waiters::new(tokio::runtime::Handle::current());
        let now = Some(tokio::time::Instant::now());
        let tickets = [
            waiters.join("released", None, now).await,
            waiters.join("released", None, now).await,
            waiters.join("released", None, now).await,
        ];
        let mut asleep: Vec<_> = tickets.iter().map(|t| Box::pin(t.released())).collect();
        for sleeping in &mut asleep {
            let woken = futures_util::FutureExt::now_or_never(sleeping.as_mut());
            assert!(woken.is_none(), "woken before any message");
        }
        waiters.resubscribed("released");
        for wake in asleep {
            tokio::time::timeout(Duration::from_secs(1), wake)
                .await
                .expect("a waiter slept on after its channel was subscribed again");
        }
    }
}
