//! Waiting for a reply awake: while a request to a nearby Redis is in
//! flight, a thread that drives the core's runtime for a caller (see
//! `driver.rs`) polls for the reply instead of sleeping in epoll, for about
//! as long as replies take. On a virtual machine an idle CPU halts, and
//! waking it for the reply costs more than the round trip itself: polling
//! took the core's cycle, driven from one thread, from 180–210 µs to 95–105 µs
//! on an idle 2-core machine (`rlock-bench hops`). Waits for a release message
//! never poll (no request is in flight then), nor does anything when replies
//! take 0.5 ms or more (a distant server), where sleeping costs nothing extra.

use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::Poll;
use std::time::{Duration, Instant};

/// Requests sent and not answered yet, in every client of the process.
static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);
/// How long replies take: a moving average, in nanoseconds (0: none yet).
static REPLY_NS: AtomicU64 = AtomicU64::new(0);

/// The longest a caller polls for one reply.
const MAX_POLL: Duration = Duration::from_micros(250);

/// One request in flight; answered (or abandoned) when dropped.
struct Request {
    sent: Instant,
}

impl Request {
    fn sent() -> Self {
        IN_FLIGHT.fetch_add(1, Ordering::AcqRel);
        Request {
            sent: Instant::now(),
        }
    }
}

impl Drop for Request {
    fn drop(&mut self) {
        IN_FLIGHT.fetch_sub(1, Ordering::AcqRel);
        let took = u64::try_from(self.sent.elapsed().as_nanos()).unwrap_or(u64::MAX);
        // A lost race between two updates only loses one sample.
        let avg = REPLY_NS.load(Ordering::Relaxed);
        REPLY_NS.store(average(avg, took), Ordering::Relaxed);
    }
}

/// Awaits `reply`, the answer to a request sent as it is first polled,
/// counted in flight meanwhile (public for benchmarks of other clients run
/// the same way).
pub async fn awaited<T>(reply: impl Future<Output = T>) -> T {
    let _in_flight = Request::sent();
    reply.await
}

/// The moving average after one more sample (weight 1/8).
fn average(avg: u64, sample: u64) -> u64 {
    if avg == 0 {
        return sample;
    }
    avg - avg / 8 + sample / 8
}

/// Replies slower than this come from a distant server, where sleeping
/// until they come costs nothing that matters.
const NEAR: Duration = Duration::from_micros(500);

/// How long to poll for a reply whose requests usually take `reply`: about
/// twice that, within 50–250 µs, when the server is near. A reply time
/// measured while sleeping includes the wake-up, so it overstates a near
/// server's; polling then catches replies early and the average comes down.
fn poll_for(reply: Duration) -> Option<Duration> {
    (reply < NEAR).then(|| (reply * 2).clamp(Duration::from_micros(50), MAX_POLL))
}

/// Runs `fut` on the current runtime, polling the runtime's I/O without
/// sleeping while a request is in flight, for as long as [`poll_for`]
/// allows since the last time none was.
pub async fn awake_for_replies<F: Future>(fut: F) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    let mut since: Option<Instant> = None;
    loop {
        // One poll of `fut`: Some(output), or None to stay awake, or Pending
        // (sleep until `fut` is woken, as a plain `.await` would).
        let step = std::future::poll_fn(|cx| {
            if let Poll::Ready(out) = fut.as_mut().poll(cx) {
                return Poll::Ready(Some(out));
            }
            if IN_FLIGHT.load(Ordering::Acquire) == 0 {
                since = None;
                return Poll::Pending;
            }
            let start = *since.get_or_insert_with(Instant::now);
            let reply = Duration::from_nanos(REPLY_NS.load(Ordering::Relaxed));
            match poll_for(reply) {
                Some(limit) if start.elapsed() < limit => Poll::Ready(None),
                _ => Poll::Pending,
            }
        })
        .await;
        match step {
            Some(out) => return out,
            None => {
                // Awake, but any other thread this CPU could run goes first:
                // on a busy machine another process's wake-up (say the next
                // holder of a lock) must not wait behind this poll.
                std::thread::yield_now();
                // Back to the runtime, which polls its I/O without blocking
                // before running this again.
                tokio::task::yield_now().await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn polls_about_twice_a_short_reply_time_and_never_for_slow_replies() {
        let us = Duration::from_micros;
        assert_eq!(poll_for(us(0)), Some(us(50)), "no sample yet: a short poll");
        assert_eq!(poll_for(us(40)), Some(us(80)));
        assert_eq!(
            poll_for(us(200)),
            Some(us(250)),
            "never longer than MAX_POLL"
        );
        assert_eq!(poll_for(us(499)), Some(us(250)));
        assert_eq!(poll_for(us(500)), None, "a distant server: sleep at once");
        assert_eq!(poll_for(Duration::from_millis(2)), None);
    }

    #[test]
    fn the_average_follows_the_replies() {
        let mut avg = average(0, 80_000);
        assert_eq!(avg, 80_000, "the first sample is the average");
        for _ in 0..40 {
            avg = average(avg, 2_000_000);
        }
        assert!(avg > 1_900_000, "{avg}: slow replies pull the average up");
        assert!(poll_for(Duration::from_nanos(avg)).is_none());
    }
}
