//! The counters and histograms of one client: relaxed atomics, so that
//! counting costs a lock cycle a few nanoseconds and never a lock or a round
//! trip. [`Stats`] is a copy of them at one moment.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use tokio::time::Instant;

use crate::error::LostReason;

/// The upper bounds (seconds) of the histograms' buckets; a last one counts
/// everything.
pub const BUCKETS: [f64; 11] = [
    0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0,
];

#[derive(Default)]
pub(crate) struct Histogram {
    /// Observations up to each bound (not cumulative), then past the last.
    buckets: [AtomicU64; BUCKETS.len() + 1],
    sum_us: AtomicU64,
}

impl Histogram {
    fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        let i = BUCKETS
            .iter()
            .position(|b| secs <= *b)
            .unwrap_or(BUCKETS.len());
        self.buckets[i].fetch_add(1, Relaxed);
        self.sum_us
            .fetch_add(d.as_micros().min(u64::MAX as u128) as u64, Relaxed);
    }

    fn snapshot(&self) -> Timings {
        let mut cumulative = 0;
        let mut counts = [0; BUCKETS.len() + 1];
        for (i, b) in self.buckets.iter().enumerate() {
            cumulative += b.load(Relaxed);
            counts[i] = cumulative;
        }
        Timings {
            count: cumulative,
            sum: Duration::from_micros(self.sum_us.load(Relaxed)),
            cumulative: counts,
        }
    }
}

/// What counting costs one uncontended lock cycle, per cycle, measured over
/// `cycles` of them on counters of their own: the records an acquisition
/// and its release make, with the clock reads they take for the wait and
/// hold times (the instants they measure from exist anyway). For `make
/// bench` (S5), which sets it beside the cycle's own time.
#[doc(hidden)]
pub fn counting_cost(cycles: u32) -> Duration {
    let metrics = std::hint::black_box(Metrics::default());
    let (start, since) = (Instant::now(), Instant::now());
    let began = Instant::now();
    for _ in 0..cycles {
        metrics.acquired(false, start.elapsed());
        metrics.released(since.elapsed());
    }
    began.elapsed() / cycles.max(1)
}

/// A histogram as read at one moment.
#[derive(Debug, Clone, PartialEq)]
pub struct Timings {
    /// How many durations were observed.
    pub count: u64,
    /// Their sum.
    pub sum: Duration,
    /// How many were at most each of [`BUCKETS`], then all of them.
    pub cumulative: [u64; BUCKETS.len() + 1],
}

/// The counters of one client.
#[derive(Default)]
pub(crate) struct Metrics {
    acquisitions: AtomicU64,
    contended: AtomicU64,
    timeouts: AtomicU64,
    releases: AtomicU64,
    renewals: AtomicU64,
    renewal_round_trips: AtomicU64,
    renewal_failures: AtomicU64,
    lost: [AtomicU64; LostReason::ALL.len()],
    reconnects: AtomicU64,
    wait: Histogram,
    hold: Histogram,
}

impl Metrics {
    /// An acquisition granted after `waited` (from the call), `contended`
    /// when its first attempt found the lock busy.
    pub(crate) fn acquired(&self, contended: bool, waited: Duration) {
        self.acquisitions.fetch_add(1, Relaxed);
        if contended {
            self.contended.fetch_add(1, Relaxed);
        }
        self.wait.observe(waited);
    }

    pub(crate) fn timed_out(&self) {
        self.timeouts.fetch_add(1, Relaxed);
    }

    /// A holding released whole, held for `held` from its grant.
    pub(crate) fn released(&self, held: Duration) {
        self.releases.fetch_add(1, Relaxed);
        self.hold.observe(held);
    }

    /// One renewal round trip renewing `holdings` holdings.
    pub(crate) fn renewed(&self, holdings: usize) {
        self.renewal_round_trips.fetch_add(1, Relaxed);
        self.renewals.fetch_add(holdings as u64, Relaxed);
    }

    pub(crate) fn renewal_failed(&self) {
        self.renewal_failures.fetch_add(1, Relaxed);
    }

    pub(crate) fn lost(&self, reason: LostReason) {
        self.lost[reason as usize].fetch_add(1, Relaxed);
    }

    pub(crate) fn reconnected(&self) {
        self.reconnects.fetch_add(1, Relaxed);
    }

    pub(crate) fn snapshot(&self) -> Stats {
        Stats {
            acquisitions: self.acquisitions.load(Relaxed),
            contended_acquisitions: self.contended.load(Relaxed),
            timeouts: self.timeouts.load(Relaxed),
            releases: self.releases.load(Relaxed),
            renewals: self.renewals.load(Relaxed),
            renewal_round_trips: self.renewal_round_trips.load(Relaxed),
            renewal_failures: self.renewal_failures.load(Relaxed),
            lost: LostReason::ALL
                .iter()
                .map(|r| (*r, self.lost[*r as usize].load(Relaxed)))
                .collect(),
            reconnects: self.reconnects.load(Relaxed),
            wait: self.wait.snapshot(),
            hold: self.hold.snapshot(),
        }
    }
}

/// What one client counted since it connected (see `Client::stats`).
#[derive(Debug, Clone, PartialEq)]
pub struct Stats {
    /// Acquisitions granted (a re-entry counts).
    pub acquisitions: u64,
    /// Those of them whose first attempt found the lock busy.
    pub contended_acquisitions: u64,
    /// Acquisitions that gave up at their deadline.
    pub timeouts: u64,
    /// Holdings released whole (their last re-entry).
    pub releases: u64,
    /// Holdings renewed by the watchdog.
    pub renewals: u64,
    /// The round trips those renewals took (one per tick, whatever the
    /// number of holdings).
    pub renewal_round_trips: u64,
    /// Renewals Redis did not confirm in time (each retried until the
    /// lease ends).
    pub renewal_failures: u64,
    /// Leases lost, by reason, every reason listed.
    pub lost: Vec<(LostReason, u64)>,
    /// Connections to Redis lost and made again (at most one a second per
    /// server).
    pub reconnects: u64,
    /// From each granted acquisition's call to its grant.
    pub wait: Timings,
    /// From each grant to the release of its holding.
    pub hold: Timings,
}

/// All zeros: what a client that has not connected yet counted.
impl Default for Stats {
    fn default() -> Self {
        Metrics::default().snapshot()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_count_each_duration_in_the_first_bucket_that_bounds_it() {
        let h = Histogram::default();
        h.observe(Duration::from_micros(500));
        h.observe(Duration::from_millis(1));
        h.observe(Duration::from_millis(7));
        h.observe(Duration::from_secs(120));
        let t = h.snapshot();
        assert_eq!(t.count, 4);
        assert_eq!(t.cumulative[0], 2, "≤ 1 ms");
        assert_eq!(t.cumulative[1], 2, "≤ 5 ms");
        assert_eq!(t.cumulative[2], 3, "≤ 10 ms");
        assert_eq!(t.cumulative[BUCKETS.len() - 1], 3, "≤ 60 s");
        assert_eq!(t.cumulative[BUCKETS.len()], 4, "all");
        assert_eq!(
            t.sum,
            Duration::from_micros(500 + 1_000 + 7_000 + 120_000_000)
        );
    }
}
