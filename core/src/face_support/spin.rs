//! Waiting for a reply awake: while a request to a nearby Redis is in
//! flight, a thread that drives the core's runtime for a caller (see
//! `driver.rs`) polls for the reply instead of sleeping in epoll, for about
//! as long as replies take. On a virtual machine an idle CPU halts, and
//! waking it for the reply costs more than the round trip itself: polling
//! took the core's cycle, driven from one thread, from 180–210 µs to 95–105 µs
//! on an idle 2-core machine (`rlock-bench hops`). Waits for a release message
//! never poll (no request is in flight then), nor does anything when replies
//! take 0.5 ms or more (a distant server), where sleeping costs nothing extra.
//!
//! An [`Operation`] also counts its own requests, so that a thread driving it
//! for a caller stays only while it awaits a reply, not while it waits for
//! another holder's release (`Driver::block_on_replies`).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// Requests sent and not answered yet, in every client of the process.
static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);
/// How long replies take: a moving average, in nanoseconds (0: none yet).
static REPLY_NS: AtomicU64 = AtomicU64::new(0);

tokio::task_local! {
    /// The requests in flight of the [`Operation`] being polled, if any.
    static OPERATION: Arc<AtomicUsize>;
}

/// The longest a caller polls for one reply.
const MAX_POLL: Duration = Duration::from_micros(250);

/// One request in flight; answered (or abandoned) when dropped.
struct Request {
    sent: Instant,
    /// The operation that sent it, when that one counts its requests.
    operation: Option<Arc<AtomicUsize>>,
}

impl Request {
    fn sent() -> Self {
        IN_FLIGHT.fetch_add(1, Ordering::AcqRel);
        let operation = OPERATION
            .try_with(|n| {
                n.fetch_add(1, Ordering::AcqRel);
                n.clone()
            })
            .ok();
        Request {
            sent: Instant::now(),
            operation,
        }
    }
}

impl Drop for Request {
    fn drop(&mut self) {
        IN_FLIGHT.fetch_sub(1, Ordering::AcqRel);
        if let Some(n) = &self.operation {
            n.fetch_sub(1, Ordering::AcqRel);
        }
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

/// One operation of a face (an acquire, a release), with its own requests in
/// flight counted apart from the process's: a thread that drives it can tell
/// a wait for its reply (a round trip: worth staying for) from a wait for
/// someone else (another holder's release: the thread has better things to
/// do, such as running that holder's release).
pub struct Operation<F> {
    fut: Pin<Box<F>>,
    requests: Arc<AtomicUsize>,
}

impl<F: Future> Operation<F> {
    pub fn new(fut: F) -> Self {
        Operation {
            fut: Box::pin(fut),
            requests: Arc::default(),
        }
    }

    /// Whether a request it sent is still unanswered.
    pub fn awaits_reply(&self) -> bool {
        self.requests.load(Ordering::Acquire) > 0
    }
}

impl<F: Future> Future for Operation<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let requests = self.requests.clone();
        OPERATION.sync_scope(requests, || self.fut.as_mut().poll(cx))
    }
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
    use std::task::Waker;
    use tokio::sync::oneshot;

    fn poll_once<F: Future + Unpin>(fut: &mut F) -> Poll<F::Output> {
        Pin::new(fut).poll(&mut Context::from_waker(Waker::noop()))
    }

    #[test]
    fn an_operation_awaits_a_reply_only_while_a_request_of_its_own_is_unanswered() {
        let (reply, replied) = oneshot::channel::<u32>();
        let mut op = Operation::new(awaited(replied));
        assert!(!op.awaits_reply(), "nothing sent before the first poll");
        assert!(poll_once(&mut op).is_pending());
        assert!(op.awaits_reply());
        // A request of no operation, in flight meanwhile, is not this one's.
        let (_other_reply, other_replied) = oneshot::channel::<u32>();
        let mut other = Box::pin(awaited(other_replied));
        assert!(poll_once(&mut other).is_pending());
        reply.send(7).unwrap();
        assert_eq!(poll_once(&mut op), Poll::Ready(Ok(7)));
        assert!(!op.awaits_reply(), "answered");
    }

    #[test]
    fn an_operation_waiting_for_anything_but_a_reply_awaits_none() {
        let (release, released) = oneshot::channel::<()>();
        let mut op = Operation::new(released);
        assert!(poll_once(&mut op).is_pending());
        assert!(!op.awaits_reply());
        release.send(()).unwrap();
        assert!(poll_once(&mut op).is_ready());
    }

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
