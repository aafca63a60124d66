//! What one client tells about itself: its counters (`telemetry/metrics.rs`,
//! read as a [`Stats`] snapshot, also as Prometheus text), and the events an
//! application hears without polling: a lease lost, a renewal that failed, a
//! connection made again, a background error. Each event is also a
//! `tracing` event (WARNING for a loss or a failed renewal, INFO for a
//! reconnect), so it reaches the application's logs from every face.

mod json;
pub(crate) mod metrics;
mod prometheus;

use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::sync::broadcast;

use crate::error::LostReason;
use metrics::Metrics;

/// Something that happened to a client outside any call of its user.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A holding's lease was lost (told once per holding).
    Lost {
        name: String,
        reason: LostReason,
        fence: u64,
    },
    /// Redis did not confirm a holding's renewal in time: it is retried
    /// until the lease ends (told once until a renewal succeeds again).
    RenewalFailed { name: String },
    /// A connection to `server` was lost; the next request makes a new one.
    Reconnect { server: String },
    /// A background task failed (the client's registration, a background
    /// cache refresh): no call of the application hears of it otherwise.
    Error { message: String },
}

/// How many events a slow listener may fall behind before it misses some.
const EVENTS_KEPT: usize = 1024;
/// A connection's failures are told once per this span: one outage fails
/// every request in flight.
const RECONNECT_TOLD_EVERY: Duration = Duration::from_secs(1);

/// The counters and the event channel of one client.
pub(crate) struct Telemetry {
    pub(crate) metrics: Metrics,
    events: broadcast::Sender<Event>,
    last_reconnect: Mutex<Option<Instant>>,
    foreign_registration_told: std::sync::atomic::AtomicBool,
}

impl Default for Telemetry {
    fn default() -> Self {
        Telemetry {
            metrics: Metrics::default(),
            events: broadcast::channel(EVENTS_KEPT).0,
            last_reconnect: Mutex::new(None),
            foreign_registration_told: Default::default(),
        }
    }
}

impl Telemetry {
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.events.subscribe()
    }

    fn tell(&self, event: Event) {
        // No listener: nobody to tell (the log has it).
        let _ = self.events.send(event);
    }

    pub(crate) fn lost(&self, name: &str, reason: LostReason, fence: u64) {
        self.metrics.lost(reason);
        if reason == LostReason::Closed {
            // Asked for: the holder closed its client.
            tracing::debug!(target: "rlock", lock = %name, fence, reason = %reason.code(), "lock lost: {reason}");
            return;
        }
        tracing::warn!(target: "rlock", lock = %name, fence, reason = %reason.code(), "lock lost: {reason}");
        self.tell(Event::Lost {
            name: name.to_owned(),
            reason,
            fence,
        });
    }

    /// A renewal not confirmed; `first` when the ones before it succeeded.
    pub(crate) fn renewal_failed(&self, name: &str, first: bool) {
        self.metrics.renewal_failed();
        if first {
            tracing::warn!(target: "rlock", lock = %name, "renewal failed; retrying until the lease ends");
            self.tell(Event::RenewalFailed {
                name: name.to_owned(),
            });
        }
    }

    /// A connection to `server` failed in a way that makes a new one.
    pub(crate) fn connection_lost(&self, server: &str, error: &dyn std::fmt::Display) {
        {
            let mut last = self.last_reconnect.lock().unwrap();
            let now = Instant::now();
            if last.is_some_and(|at| now.duration_since(at) < RECONNECT_TOLD_EVERY) {
                return;
            }
            *last = Some(now);
        }
        self.metrics.reconnected();
        tracing::info!(target: "rlock", server, error = %error, "connection to Redis lost; reconnecting");
        self.tell(Event::Reconnect {
            server: server.to_owned(),
        });
    }

    /// The client's registration key holds someone else's data: logged
    /// once, and an event each time it is found (at most every 10 s), so a
    /// listener that came after the connection still hears of it.
    pub(crate) fn foreign_registration(&self, key: &str) {
        use std::sync::atomic::Ordering;
        let message = format!(
            "{key} holds data that is not this client's registration: left alone, \
             so inspection cannot name this client"
        );
        if !self.foreign_registration_told.swap(true, Ordering::Relaxed) {
            tracing::warn!(target: "rlock", "{message}");
        }
        self.tell(Event::Error { message });
    }

    pub(crate) fn error(&self, message: String) {
        tracing::warn!(target: "rlock", "{message}");
        self.tell(Event::Error { message });
    }
}
