//! The deployment a client talks to: one endpoint (a server, a Sentinel
//! group's master, or a Cluster), or several independent masters where every
//! decision takes a majority (Redlock). Lock code asks the deployment; only
//! this module knows whether a quorum is involved.

use std::time::Duration;

use futures_util::stream::{FuturesUnordered, StreamExt};
use rand::Rng;
use tokio::time::Instant;

use super::endpoint::{AcquireRequest, Member, ReleaseOf};
use super::scripts::{owner_checked, AcquireReply, LockState, ManyHolderState};
use crate::error::{Error, NotOwnedReason, OptionName, Result};
use crate::keys::Keys;

/// The answer to an acquire request.
pub(crate) enum Attempt {
    Held {
        fence: u64,
        count: u32,
    },
    /// Not held: sleep at most `retry_in` before the next attempt (a release
    /// message may come first, unless this is a `backoff`). `cause` says why
    /// when members failed.
    Busy {
        retry_in_ms: i64,
        cause: Option<String>,
        /// Nobody else holds it: this attempt fell short (a split vote, too
        /// few members or replicas) and gave back what it got. The retry waits
        /// out its random delay whatever release messages come, those of
        /// its own give-back included, so that rivals fall out of step.
        backoff: bool,
        /// Waiters stand in line (one Redis deployment only): releases hand
        /// the lock to them with no release message.
        waiters_in_line: bool,
        /// The token of a grant this attempt got and gave back (too few
        /// replicas had it): a handoff message naming it grants nothing.
        undone: Option<u64>,
        /// The last fencing token issued in the name's slot when this attempt
        /// ran (one Redis deployment; 0 otherwise): a grant it names or an
        /// older one had ended by then.
        issued: u64,
    },
}

pub(crate) struct Deployment {
    members: Vec<Member>,
    secrets: Vec<String>,
    /// Per-member bound on one request in Redlock mode (`node_timeout`).
    node_timeout: Duration,
}

impl Deployment {
    pub(crate) fn new(members: Vec<Member>, secrets: Vec<String>, node_timeout: Duration) -> Self {
        Deployment {
            members,
            secrets,
            node_timeout,
        }
    }

    pub(crate) fn members(&self) -> &[Member] {
        &self.members
    }

    pub(crate) fn is_redlock(&self) -> bool {
        self.members.len() > 1
    }

    fn quorum(&self) -> usize {
        self.members.len() / 2 + 1
    }

    /// How much earlier than Redis a holder must consider its lease over:
    /// room for the clocks of client and servers running at slightly
    /// different rates (Redlock's drift allowance), and for telling the
    /// holder (a signal to a command, say) before Redis lets the lock go.
    pub(crate) fn drift(&self, lease: Duration) -> Duration {
        lease / 100 + Duration::from_millis(2)
    }

    /// Why an attempt could not take a lock whose key `bad` (an index in
    /// `acquire.lua`'s KEYS) holds a value of another type.
    fn wrong_type(&self, keys: &Keys, bad: usize) -> Option<String> {
        let key = match (keys.family.is_many_holder(), bad) {
            (_, 1) => &keys.lock,
            (false, 2) | (true, 3) => &keys.fence,
            (false, 3) | (true, 4) => &keys.queue,
            (false, 4) | (true, 5) => &keys.leases,
            (true, 2) => &keys.until,
            _ => return None,
        };
        Some(format!(
            "the key {key} holds a value of another type than this lock's"
        ))
    }

    /// Maps a Redis error at `member` to the connection category, naming the
    /// server, without secrets.
    pub(crate) fn error(&self, member: &Member, e: &redis::RedisError) -> Error {
        Error::Connection(format!(
            "{}: {}",
            member.server(),
            self.scrub(e.to_string())
        ))
    }

    pub(crate) fn scrub(&self, mut text: String) -> String {
        for s in self.secrets.iter().filter(|s| !s.is_empty()) {
            text = text.replace(s.as_str(), "***");
        }
        text
    }

    fn only(&self) -> Option<&Member> {
        match self.members.as_slice() {
            [member] => Some(member),
            _ => None,
        }
    }

    /// Runs `op` on every member in parallel, each bounded by the node timeout,
    /// and hands the outcomes to `enough` as they arrive; stops waiting as
    /// soon as `enough` says the answer is decided (a slow member never stalls
    /// a decided quorum).
    async fn each<'a, T, F, Fut>(
        &'a self,
        op: F,
        mut enough: impl FnMut(&[(usize, std::result::Result<T, String>)]) -> bool,
    ) -> Vec<(usize, std::result::Result<T, String>)>
    where
        F: Fn(&'a Member) -> Fut,
        Fut: std::future::Future<Output = redis::RedisResult<T>> + 'a,
    {
        let mut pending: FuturesUnordered<_> = self
            .members
            .iter()
            .enumerate()
            .map(|(i, member)| {
                let fut = op(member);
                async move {
                    let r = match tokio::time::timeout(self.node_timeout, fut).await {
                        Ok(Ok(v)) => Ok(v),
                        Ok(Err(e)) => Err(format!(
                            "{}: {}",
                            member.server(),
                            self.scrub(e.to_string())
                        )),
                        Err(_) => Err(format!(
                            "{}: no reply within {:?}",
                            member.server(),
                            self.node_timeout
                        )),
                    };
                    (i, r)
                }
            })
            .collect();
        let mut done = Vec::with_capacity(self.members.len());
        while let Some(outcome) = pending.next().await {
            done.push(outcome);
            if enough(&done) {
                break;
            }
        }
        done
    }

    pub(crate) async fn acquire(&self, req: &AcquireRequest<'_>) -> Result<Attempt> {
        let lease_ms = req.lease.as_millis() as u64;
        if let Some(member) = self.only() {
            let (reply, acked) = member
                .acquire(req)
                .await
                .map_err(|e| self.error(member, &e))?;
            return match reply {
                AcquireReply::Held { fence, count } => {
                    match (req.replicas, acked) {
                        (Some(k), Some(acked)) if acked < k => {
                            // Too few replicas have it: undo this acquisition
                            // (a re-entry only loses its increment), then retry.
                            member
                                .release(
                                    req.keys,
                                    req.owner,
                                    lease_ms,
                                    ReleaseOf::undo(fence, count),
                                )
                                .await
                                .map_err(|e| self.error(member, &e))?;
                            Ok(Attempt::Busy {
                                retry_in_ms: rand::rng().random_range(5..=50),
                                cause: Some(format!(
                                    "only {acked} of {k} replicas acknowledged the acquisition"
                                )),
                                backoff: true,
                                waiters_in_line: false,
                                undone: Some(fence),
                                issued: fence,
                            })
                        }
                        _ => Ok(Attempt::Held { fence, count }),
                    }
                }
                AcquireReply::Busy {
                    pttl_ms,
                    queued: waiters_in_line,
                    bad,
                    issued,
                } => Ok(Attempt::Busy {
                    retry_in_ms: pttl_ms,
                    cause: self.wrong_type(req.keys, bad),
                    backoff: false,
                    waiters_in_line,
                    undone: None,
                    issued,
                }),
                AcquireReply::SizeDiffers { stored } => {
                    let (_, asked) = req.kind.asked();
                    Err(Error::invalid_option(
                        OptionName::Permits,
                        format!("is {asked}, but this semaphore's holders use {stored}: every user of one semaphore gives the same number"),
                    ))
                }
                AcquireReply::PermitsDiffer { held } => {
                    let (asked, _) = req.kind.asked();
                    Err(Error::invalid_option(
                        OptionName::Take,
                        format!("is {asked}, but this owner holds the semaphore with {held} permits already: a re-entry takes the same number"),
                    ))
                }
            };
        }
        self.acquire_quorum(req, lease_ms).await
    }

    /// A waiter leaves the line; the fencing token when the lock was handed
    /// to it meanwhile (the caller passes it on). Only one deployment keeps a
    /// line.
    pub(crate) async fn dequeue(&self, keys: &Keys, owner: &str) -> Result<Option<u64>> {
        match self.only() {
            Some(member) => member
                .dequeue(keys, owner)
                .await
                .map_err(|e| self.error(member, &e)),
            None => Ok(None),
        }
    }

    /// Redlock: the lock is held when a majority granted it within the
    /// validity time (lease − elapsed − drift) measured from before sending.
    /// A re-entry is one only where a majority re-entered: masters that
    /// granted it afresh (their key was gone) may have let a rival in
    /// meanwhile.
    async fn acquire_quorum(&self, req: &AcquireRequest<'_>, lease_ms: u64) -> Result<Attempt> {
        let start = Instant::now();
        let quorum = self.quorum();
        let n = self.members.len();
        let re_entry = req.believed > 0;
        let outcomes = self
            .each(
                |member| async move { member.acquire(req).await.map(|(r, _)| r) },
                // Done early only on success: a failed attempt must hear from
                // every member before giving back what it got, and a re-entry
                // from a majority that re-entered.
                |done| {
                    done.iter()
                        .filter(|(_, r)| match r {
                            Ok(AcquireReply::Held { count, .. }) => !re_entry || *count > 1,
                            _ => false,
                        })
                        .count()
                        >= quorum
                },
            )
            .await;
        let mut fence = 0;
        let mut counts = Vec::with_capacity(n);
        let mut busy_ttl: Option<i64> = None;
        let mut busy = 0;
        let mut errors = Vec::new();
        for (_, r) in &outcomes {
            match r {
                Ok(AcquireReply::Held { fence: f, count: c }) => {
                    fence = fence.max(*f);
                    counts.push(*c);
                }
                Ok(AcquireReply::Busy { pttl_ms, .. }) => {
                    busy += 1;
                    busy_ttl = Some(busy_ttl.map_or(*pttl_ms, |b| b.min(*pttl_ms)));
                }
                // Only a mutex is taken by a quorum (read-write locks and
                // semaphores refuse Redlock when they are made).
                Ok(AcquireReply::SizeDiffers { .. } | AcquireReply::PermitsDiffer { .. }) => {
                    errors.push("unexpected script reply".to_owned())
                }
                Err(e) => errors.push(e.clone()),
            }
        }
        let held = counts.len();
        let validity = req
            .lease
            .saturating_sub(start.elapsed() + self.drift(req.lease));
        if held >= quorum && !validity.is_zero() {
            // The count a majority has at least, as releases combine their
            // answers: a re-entry that only a minority counted is a fresh
            // grant (count 1), which the re-entry check gives back as lost.
            counts.sort_unstable_by(|a, b| b.cmp(a));
            let count = counts[quorum - 1];
            return Ok(Attempt::Held { fence, count });
        }
        if req.believed == 0 && busy < n {
            // A minority (or a majority too late) is worth nothing: give it
            // all back, on every node, before anyone waits on it; a master
            // that did not answer in time may have granted it too. Only when
            // every master answered "busy" is there nothing to give back.
            // (A failed re-entry keeps the holding it re-entered.) Each
            // master that answered gets back the very grant it made, so a
            // give-back that arrives late never undoes a later attempt's.
            // Announced as a give-back, which wakes waiters only after a
            // pause (see `Waiters::given_back`): it undid only what this
            // attempt did.
            let mut given = vec![ReleaseOf::GIVEN_BACK; n];
            for (i, r) in &outcomes {
                if let Ok(AcquireReply::Held { fence, count }) = r {
                    given[*i] = ReleaseOf {
                        given_back: true,
                        ..ReleaseOf::undo(*fence, *count)
                    };
                }
            }
            let _ = self
                .each(
                    |member| {
                        let i = self.index_of(member);
                        member.release(req.keys, req.owner, lease_ms, given[i])
                    },
                    |_| false,
                )
                .await;
        }
        let cause = (!errors.is_empty()).then(|| {
            format!(
                "quorum {quorum} of {n} not reached: {} granted; {}",
                held,
                errors.join("; ")
            )
        });
        // Held by others on a majority, or on enough masters to rule out a
        // quorum whatever the failed ones answer: nothing this waiter does
        // changes that before a release (whatever a minority granted it,
        // given back above), so it waits for a release message or the
        // shortest lease. A split vote, or too few masters answering: retry
        // after a random delay.
        let (retry_in_ms, backoff) = match busy_ttl {
            Some(ttl) if busy >= quorum || (held == 0 && busy > n - quorum) => (ttl, false),
            _ => (rand::rng().random_range(5..=50), true),
        };
        Ok(Attempt::Busy {
            retry_in_ms,
            cause,
            backoff,
            waiters_in_line: false,
            undone: None,
            issued: 0,
        })
    }

    fn index_of(&self, member: &Member) -> usize {
        self.members
            .iter()
            .position(|n| std::ptr::eq(n, member))
            .unwrap_or(0)
    }

    /// Releases one acquisition: the re-entries left, or why not.
    pub(crate) async fn release(
        &self,
        keys: &Keys,
        owner: &str,
        lease_ms: u64,
        of: ReleaseOf,
    ) -> Result<std::result::Result<u32, NotOwnedReason>> {
        if let Some(member) = self.only() {
            let v = member
                .release(keys, owner, lease_ms, of)
                .await
                .map_err(|e| self.error(member, &e))?;
            return Ok(owner_checked(v));
        }
        // Redlock: release everywhere. It was not ours when a majority says
        // so (a rival could have held it meanwhile); a master that failed
        // proves nothing either way, as for renewals. Each master counts
        // its own tokens: the holding is named by owner alone.
        let of = ReleaseOf { fence: 0, ..of };
        let outcomes = self
            .each(
                |member| member.release(keys, owner, lease_ms, of),
                |_| false,
            )
            .await;
        self.combine_owner_checked(outcomes, 1)
    }

    /// Resets the lease: everywhere, confirmed by a majority in Redlock mode.
    /// `Ok(Err(reason))` when this owner does not hold it.
    pub(crate) async fn extend(
        &self,
        keys: &Keys,
        owner: &str,
        lease_ms: u64,
        replicas: Option<u32>,
        fence: u64,
    ) -> Result<std::result::Result<u32, NotOwnedReason>> {
        if let Some(member) = self.only() {
            let (v, acked) = member
                .extend(keys, owner, lease_ms, replicas, fence)
                .await
                .map_err(|e| self.error(member, &e))?;
            if let (Some(k), Some(acked)) = (replicas, acked) {
                if acked < k && v == 1 {
                    return Err(Error::Connection(format!(
                        "the extension reached only {acked} of {k} replicas"
                    )));
                }
            }
            return Ok(owner_checked(v));
        }
        let outcomes = self
            .each(
                |member| async move {
                    member
                        .extend(keys, owner, lease_ms, None, 0)
                        .await
                        .map(|(v, _)| v)
                },
                |_| false,
            )
            .await;
        self.combine_owner_checked(outcomes, self.quorum())
    }

    /// Combines owner-checked replies (≥0 ok, -1 gone, -2 another owner):
    /// not-owned when a majority refuses, else ok with `needed`
    /// confirmations, else a connection error (failed members leave it
    /// undecided).
    fn combine_owner_checked(
        &self,
        outcomes: Vec<(usize, std::result::Result<i64, String>)>,
        needed: usize,
    ) -> Result<std::result::Result<u32, NotOwnedReason>> {
        let mut ok = Vec::new();
        let mut other = false;
        let mut refusals = 0;
        let mut errors = Vec::new();
        for (_, r) in outcomes {
            match r.map(owner_checked) {
                Ok(Ok(v)) => ok.push(v),
                Ok(Err(reason)) => {
                    refusals += 1;
                    other |= reason == NotOwnedReason::HeldByAnother;
                }
                Err(e) => errors.push(e),
            }
        }
        if refusals > self.members.len() - self.quorum() {
            return Ok(Err(if other {
                NotOwnedReason::HeldByAnother
            } else {
                NotOwnedReason::Expired
            }));
        }
        if ok.len() >= needed {
            // The count a majority still has at least (one stale master does
            // not keep a released holding alive); with fewer answers the
            // most of them, as nothing shows that a majority let go.
            ok.sort_unstable_by(|a, b| b.cmp(a));
            let i = if ok.len() >= self.quorum() {
                self.quorum() - 1
            } else {
                0
            };
            return Ok(Ok(ok[i]));
        }
        Err(Error::Connection(format!(
            "{} of {} nodes confirmed: {}",
            ok.len(),
            self.members.len(),
            errors.join("; ")
        )))
    }

    /// The lock's state; in Redlock mode, as a majority sees it.
    pub(crate) async fn inspect(&self, keys: &Keys) -> Result<LockState> {
        if let Some(member) = self.only() {
            return member
                .inspect(keys)
                .await
                .map_err(|e| self.error(member, &e));
        }
        let outcomes = self.each(|member| member.inspect(keys), |_| false).await;
        let states: Vec<LockState> = outcomes
            .iter()
            .filter_map(|(_, r)| r.as_ref().ok().cloned())
            .collect();
        if states.len() < self.quorum() {
            let errors: Vec<String> = outcomes.into_iter().filter_map(|(_, r)| r.err()).collect();
            return Err(Error::Connection(format!(
                "fewer than a majority of nodes answered: {}",
                errors.join("; ")
            )));
        }
        Ok(majority_view(&states, self.quorum()))
    }

    /// The state of a read-write lock or semaphore (one deployment: they
    /// refuse Redlock).
    pub(crate) async fn inspect_many_holder(&self, keys: &Keys) -> Result<ManyHolderState> {
        let member = &self.members[0];
        member
            .inspect_many_holder(keys)
            .await
            .map_err(|e| self.error(member, &e))
    }

    /// Renews a batch of holdings (keys, owner, lease, token); per holding
    /// `Some(1)` when confirmed,
    /// `Some(-1|-2)` when lost, `None` when unknown (retry soon).
    pub(crate) async fn renew(
        &self,
        batch: &[(&Keys, &str, u64, u64)],
        deadline: Instant,
    ) -> Vec<Option<i64>> {
        if let Some(member) = self.only() {
            return member.extend_many(batch, deadline).await;
        }
        // Each master counts its own tokens: the holding is named by owner
        // alone.
        let batch: Vec<_> = batch
            .iter()
            .map(|&(keys, owner, lease_ms, _)| (keys, owner, lease_ms, 0))
            .collect();
        let batch = batch.as_slice();
        let quorum = self.quorum();
        let n = self.members.len();
        let per_member =
            futures_util::future::join_all(self.members.iter().map(|member| async move {
                let deadline = deadline.min(Instant::now() + self.node_timeout);
                member.extend_many(batch, deadline).await
            }))
            .await;
        (0..batch.len())
            .map(|i| {
                let replies: Vec<i64> = per_member.iter().filter_map(|r| r[i]).collect();
                let confirmed = replies.iter().filter(|v| **v >= 0).count();
                let refused: Vec<i64> = replies.iter().copied().filter(|v| *v < 0).collect();
                if confirmed >= quorum {
                    Some(1)
                } else if refused.len() > n - quorum {
                    Some(if refused.contains(&-2) { -2 } else { -1 })
                } else {
                    None
                }
            })
            .collect()
    }
}

/// What a majority of members agree on.
fn majority_view(states: &[LockState], quorum: usize) -> LockState {
    let holders = |owner: &Option<String>| {
        states
            .iter()
            .filter(|s| s.held && &s.owner == owner)
            .count()
    };
    let owner = states
        .iter()
        .filter(|s| s.held)
        .map(|s| &s.owner)
        .find(|o| o.is_some() && holders(o) >= quorum)
        .cloned()
        .flatten();
    let held_by_majority = states.iter().filter(|s| s.held).count() >= quorum;
    let mine: Vec<&LockState> = states
        .iter()
        .filter(|s| s.held && owner.is_some() && s.owner == owner)
        .collect();
    let longest = states.iter().max_by_key(|s| s.waiting);
    let mut ttls: Vec<u64> = mine.iter().filter_map(|s| s.ttl_ms).collect();
    ttls.sort_unstable();
    LockState {
        held: held_by_majority,
        count: mine.iter().map(|s| s.count).max().unwrap_or(0),
        fence: mine.iter().filter_map(|s| s.fence).max(),
        // The lease still held on a majority: the quorum-th longest.
        ttl_ms: ttls.len().checked_sub(quorum).map(|i| ttls[i]),
        fence_counter: states.iter().filter_map(|s| s.fence_counter).max(),
        waiting: states.iter().map(|s| s.waiting).max().unwrap_or(0),
        held_for: mine.iter().filter_map(|s| s.held_for).max(),
        // The longest line seen: waiters join it on every master they reach.
        line: longest.map(|s| s.line.clone()).unwrap_or_default(),
        line_waited: longest.map(|s| s.line_waited.clone()).unwrap_or_default(),
        owner,
    }
}
