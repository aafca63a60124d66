//! Waiting for a lock: the one shared pub/sub connection of a client, and the
//! one place that decides whom a release message wakes.
//!
//! A waiter joins the release channel of its lock before its second attempt
//! (so a release between that attempt and its sleep is never missed), then
//! sleeps until a release message or the holder's remaining lease, whichever
//! comes first. Waiters of one client share one subscription per channel, and a
//! message wakes exactly one of them (`Notify::notify_one`): the others sleep on,
//! so a handoff costs one attempt per client, not one per waiting thread.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures_util::StreamExt;
use rand::Rng;
use tokio::sync::{mpsc, watch, Notify};

use crate::client::Shutdown;

/// How long a joining waiter waits for the SUBSCRIBE confirmation before it
/// relies on its lease-bounded sleep alone (Redis may be down).
const SUBSCRIBE_WAIT: Duration = Duration::from_millis(1000);
const RECONNECT_MIN: Duration = Duration::from_millis(50);
const RECONNECT_MAX: Duration = Duration::from_secs(2);

/// The waiters of one channel in one client.
struct Channel {
    waiters: usize,
    wake: Arc<Notify>,
    /// True once the pub/sub connection confirmed the subscription.
    subscribed: watch::Sender<bool>,
}

/// The registry of waiting channels and the handle on the pub/sub task.
pub(crate) struct Waiters {
    channels: Mutex<HashMap<String, Channel>>,
    /// Asks the pub/sub task to bring one channel's subscription in line with
    /// the registry (subscribe when it has waiters, unsubscribe when not).
    sync: mpsc::UnboundedSender<String>,
    sync_rx: Mutex<Option<mpsc::UnboundedReceiver<String>>>,
}

/// A waiter's membership of one channel; leaving is dropping it.
pub(crate) struct Ticket {
    waiters: Arc<Waiters>,
    channel: String,
    wake: Arc<Notify>,
}

impl Waiters {
    pub(crate) fn new() -> Arc<Self> {
        let (sync, rx) = mpsc::unbounded_channel();
        Arc::new(Waiters {
            channels: Mutex::new(HashMap::new()),
            sync,
            sync_rx: Mutex::new(Some(rx)),
        })
    }

    /// Joins `channel`, subscribing the shared connection when this is its
    /// first waiter, and returns once the subscription is confirmed (or after a
    /// bounded wait when Redis does not answer: the waiter's sleeps are bounded
    /// by the holder's lease anyway). `start` launches the pub/sub task on
    /// first use.
    pub(crate) async fn join(
        self: &Arc<Self>,
        channel: &str,
        start: impl FnOnce(mpsc::UnboundedReceiver<String>),
    ) -> Ticket {
        if let Some(rx) = self.sync_rx.lock().unwrap().take() {
            start(rx);
        }
        let (wake, mut subscribed) = {
            let mut channels = self.channels.lock().unwrap();
            let entry = channels
                .entry(channel.to_owned())
                .or_insert_with(|| Channel {
                    waiters: 0,
                    wake: Arc::new(Notify::new()),
                    subscribed: watch::channel(false).0,
                });
            entry.waiters += 1;
            if entry.waiters == 1 {
                // Sent under the registry lock, so subscribe and unsubscribe
                // requests reach the task in the order the counts changed.
                let _ = self.sync.send(channel.to_owned());
            }
            (entry.wake.clone(), entry.subscribed.subscribe())
        };
        let _ = tokio::time::timeout(SUBSCRIBE_WAIT, subscribed.wait_for(|s| *s)).await;
        Ticket {
            waiters: self.clone(),
            channel: channel.to_owned(),
            wake,
        }
    }

    /// A release message arrived on `channel`: wake one of its waiters. When
    /// none is asleep right now, the wake is kept for the next one to sleep,
    /// so a waiter busy with an attempt does not miss it.
    fn deliver(&self, channel: &str) {
        if let Some(c) = self.channels.lock().unwrap().get(channel) {
            c.wake.notify_one();
        }
    }

    /// Channels that have waiters: what the connection must be subscribed to.
    fn wanted(&self) -> Vec<String> {
        self.channels.lock().unwrap().keys().cloned().collect()
    }

    fn has_waiters(&self, channel: &str) -> bool {
        self.channels.lock().unwrap().contains_key(channel)
    }

    fn mark_subscribed(&self, channel: &str, on: bool) {
        if let Some(c) = self.channels.lock().unwrap().get(channel) {
            c.subscribed.send_replace(on);
        }
    }

    /// After a reconnect every message sent meanwhile may be lost: wake one
    /// waiter per channel so each client re-checks.
    fn wake_all_channels(&self) {
        for c in self.channels.lock().unwrap().values() {
            c.wake.notify_one();
        }
    }
}

impl Ticket {
    /// Resolves on a release message for this channel (or a reconnect).
    pub(crate) async fn released(&self) {
        self.wake.notified().await
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut channels = self.waiters.channels.lock().unwrap();
        if let Some(entry) = channels.get_mut(&self.channel) {
            entry.waiters -= 1;
            if entry.waiters == 0 {
                channels.remove(&self.channel);
                let _ = self.waiters.sync.send(self.channel.clone());
            }
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

/// The pub/sub task of one client: keeps one connection subscribed to the
/// channels that have waiters, reconnects when it drops, and hands each
/// message to [`Waiters::deliver`]. It ends when the client is dropped.
pub(crate) async fn run_pubsub(
    redis: redis::Client,
    waiters: Weak<Waiters>,
    mut sync: mpsc::UnboundedReceiver<String>,
    mut shutdown: Shutdown,
    connect_timeout: Duration,
) {
    let mut backoff = RECONNECT_MIN;
    let mut reconnecting = false;
    loop {
        let connected = tokio::select! {
            _ = shutdown.signalled() => return,
            c = tokio::time::timeout(connect_timeout, redis.get_async_pubsub()) => c,
        };
        let pubsub = match connected {
            Ok(Ok(p)) => p,
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "pub/sub connect failed; waiters fall back to lease-bounded sleeps");
                tokio::select! {
                    _ = shutdown.signalled() => return,
                    _ = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(RECONNECT_MAX);
                continue;
            }
            Err(_) => continue,
        };
        backoff = RECONNECT_MIN;
        let (mut sink, mut stream) = pubsub.split();
        let mut subscribed: HashSet<String> = HashSet::new();
        let Some(w) = waiters.upgrade() else { return };
        // Subscribe what waiters need. After a reconnect, also wake them:
        // messages published while the connection was down are gone.
        for channel in w.wanted() {
            if sink.subscribe(&channel).await.is_ok() {
                w.mark_subscribed(&channel, true);
                subscribed.insert(channel);
            }
        }
        if reconnecting {
            w.wake_all_channels();
        }
        reconnecting = true;
        drop(w);
        loop {
            tokio::select! {
                _ = shutdown.signalled() => return,
                msg = stream.next() => match msg {
                    Some(msg) => {
                        let Some(w) = waiters.upgrade() else { return };
                        w.deliver(msg.get_channel_name());
                    }
                    None => {
                        tracing::debug!("pub/sub connection dropped; reconnecting");
                        break;
                    }
                },
                channel = sync.recv() => {
                    let Some(channel) = channel else { return };
                    let Some(w) = waiters.upgrade() else { return };
                    let wanted = w.has_waiters(&channel);
                    let have = subscribed.contains(&channel);
                    let result = if wanted && !have {
                        let r = sink.subscribe(&channel).await;
                        if r.is_ok() {
                            subscribed.insert(channel.clone());
                        }
                        r
                    } else if !wanted && have {
                        subscribed.remove(&channel);
                        sink.unsubscribe(&channel).await
                    } else {
                        Ok(())
                    };
                    if wanted && subscribed.contains(&channel) {
                        // Also for a channel re-joined before its unsubscribe
                        // was processed: it never stopped being subscribed.
                        w.mark_subscribed(&channel, true);
                    }
                    if let Err(e) = result {
                        tracing::debug!(error = %e, "pub/sub request failed; reconnecting");
                        break;
                    }
                }
            }
        }
        if let Some(w) = waiters.upgrade() {
            for channel in &subscribed {
                w.mark_subscribed(channel, false);
            }
        }
    }
}
