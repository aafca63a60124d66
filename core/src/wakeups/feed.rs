//! Feeds: the pub/sub connections that hear release messages, one per Redis
//! endpoint of a client (one for a server or a Cluster, one per master in
//! Redlock mode), started on the client's first wait. Each keeps its
//! subscriptions in line with the waiters registry and hands every message to
//! `Waiters::deliver`; each ends when the client is dropped.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Weak};
use std::time::Duration;

use futures_util::StreamExt;
use redis::{PushKind, Value};
use tokio::sync::mpsc;

use super::registry::Waiters;
use crate::redis::endpoint::{Connector, Feed};
use crate::redis::scripts::{is_noscript, HEARD};
use crate::shutdown::Shutdown;
use crate::telemetry::Telemetry;

const RECONNECT_MIN: Duration = Duration::from_millis(50);
const RECONNECT_MAX: Duration = Duration::from_secs(2);

pub(crate) async fn run(
    feed: Feed,
    server: String,
    telemetry: Arc<Telemetry>,
    waiters: Weak<Waiters>,
    requests: mpsc::UnboundedReceiver<String>,
    shutdown: Shutdown,
    connect_timeout: Duration,
) {
    match feed {
        Feed::Plain(connector) => {
            let told = Told { server, telemetry };
            run_plain(
                connector,
                told,
                waiters,
                requests,
                shutdown,
                connect_timeout,
            )
            .await
        }
        Feed::Sharded(cluster) => run_sharded(cluster, waiters, requests, shutdown).await,
    }
}

/// Where a plain feed tells of a dropped connection.
struct Told {
    server: String,
    telemetry: Arc<Telemetry>,
}

impl Told {
    fn lost(&self, error: &dyn std::fmt::Display) {
        self.telemetry.connection_lost(&self.server, error);
    }
}

/// SUBSCRIBE on one server (or the current master of a Sentinel group),
/// reconnecting with backoff when the connection drops.
async fn run_plain(
    connector: Connector,
    told: Told,
    waiters: Weak<Waiters>,
    mut requests: mpsc::UnboundedReceiver<String>,
    mut shutdown: Shutdown,
    connect_timeout: Duration,
) {
    let mut backoff = RECONNECT_MIN;
    let mut reconnecting = false;
    loop {
        let connect = async {
            let client = connector.client().await?;
            client.get_async_pubsub().await
        };
        let connected = tokio::select! {
            _ = shutdown.signalled() => return,
            c = tokio::time::timeout(connect_timeout, connect) => c,
        };
        let Ok(Ok(pubsub)) = connected else {
            tracing::debug!(target: "rlock", "pub/sub connect failed; waiters fall back to lease-bounded sleeps");
            tokio::select! {
                _ = shutdown.signalled() => return,
                _ = tokio::time::sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(RECONNECT_MAX);
            continue;
        };
        backoff = RECONNECT_MIN;
        let (mut sink, mut stream) = pubsub.split();
        let mut subscribed: HashSet<String> = HashSet::new();
        let Some(w) = waiters.upgrade() else { return };
        for channel in w.wanted() {
            if sink.subscribe(&channel).await.is_ok() {
                w.confirm(&channel, true);
                subscribed.insert(channel);
            }
        }
        // Messages published while the connection was down are gone.
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
                        w.deliver(msg.get_channel_name(), msg.get_payload_bytes());
                    }
                    None => {
                        told.lost(&"pub/sub connection dropped");
                        break;
                    }
                },
                channel = requests.recv() => {
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
                        w.confirm(&channel, true);
                    }
                    if let Err(e) = result {
                        told.lost(&e);
                        break;
                    }
                }
            }
        }
        if let Some(w) = waiters.upgrade() {
            for channel in &subscribed {
                w.confirm(channel, false);
            }
        }
    }
}

/// SSUBSCRIBE through a Cluster: redis-rs routes each channel to its slot's
/// node and re-subscribes after reconnects and slot-map refreshes, announcing
/// each re-subscription with a push; that push is also the cue that messages
/// may have been missed. A node that stops serving a slot (a slot migrated, a
/// master failed over) drops that slot's subscriptions with an `sunsubscribe`
/// push: a channel still wanted is subscribed again where the slot now lives,
/// and its waiters try again at once.
///
/// A channel counts as subscribed once its `ssubscribe` push came, not when
/// the command returned: redis-rs takes an `sunsubscribe` the node sends on
/// its own for the reply of the request then in flight (an SSUBSCRIBE sent
/// to the node that just lost the slot then "succeeds" unheard). One whose
/// push does not come within `CONFIRM_WITHIN` is sent again.
async fn run_sharded(
    cluster: std::sync::Arc<redis::cluster::ClusterClient>,
    waiters: Weak<Waiters>,
    mut requests: mpsc::UnboundedReceiver<String>,
    mut shutdown: Shutdown,
) {
    let (tx, mut pushes) = mpsc::unbounded_channel();
    let conn = loop {
        let config = redis::cluster::ClusterConfig::new().set_push_sender(tx.clone());
        match cluster.get_async_connection_with_config(config).await {
            Ok(c) => break c,
            Err(e) => {
                tracing::debug!(target: "rlock", error = %e, "sharded pub/sub connect failed; retrying");
                tokio::select! {
                    _ = shutdown.signalled() => return,
                    _ = tokio::time::sleep(RECONNECT_MAX) => {}
                }
            }
        }
    };
    let mut feed = Sharded {
        conn,
        subscribed: HashSet::new(),
        pending: HashMap::new(),
        changes: HashMap::new(),
    };
    let mut tick = tokio::time::interval(CONFIRM_WITHIN / 2);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut probe = tokio::time::interval(PROBE_EVERY);
    probe.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut probed = 0usize;
    let (unheard_tx, mut unheard) = mpsc::unbounded_channel();
    loop {
        let waiting = !feed.pending.is_empty();
        let listening = !feed.subscribed.is_empty();
        tokio::select! {
            _ = shutdown.signalled() => return,
            push = pushes.recv() => {
                let Some(push) = push else { return };
                let Some(w) = waiters.upgrade() else { return };
                let channel = match push.data.first() {
                    Some(Value::BulkString(b)) => String::from_utf8_lossy(b).into_owned(),
                    _ => continue,
                };
                let payload = match push.data.get(1) {
                    Some(Value::BulkString(b)) => b.as_slice(),
                    _ => &[],
                };
                match push.kind {
                    PushKind::SMessage | PushKind::Message => w.deliver(&channel, payload),
                    PushKind::SSubscribe => feed.confirmed(&w, channel),
                    PushKind::SUnsubscribe => feed.dropped(&w, channel),
                    _ => {}
                }
            }
            _ = tick.tick(), if waiting => {
                let Some(w) = waiters.upgrade() else { return };
                feed.unconfirmed(&w);
            }
            _ = probe.tick(), if listening => {
                probed = feed.probe(probed, &unheard_tx);
            }
            Some((channel, asked)) = unheard.recv() => {
                let Some(w) = waiters.upgrade() else { return };
                feed.unheard(&w, channel, asked);
            }
            channel = requests.recv() => {
                let Some(channel) = channel else { return };
                let Some(w) = waiters.upgrade() else { return };
                feed.requested(&w, channel);
            }
        }
    }
}

/// How long a sharded subscription may go without its confirming push
/// before it is sent again; also the bound of each command a feed sends.
const CONFIRM_WITHIN: Duration = Duration::from_secs(1);
/// How often a feed checks that the slots of its channels are still served
/// where redis-rs subscribed them, and how many channels (in turn) each
/// time (see `Sharded::probe`).
const PROBE_EVERY: Duration = Duration::from_millis(500);
const PROBES_AT_ONCE: usize = 4;

/// The subscriptions of a sharded feed. Commands go out in tasks of their
/// own, never awaited by the feed's loop: a node that does not answer holds
/// up no other channel's messages, and what each did is known from the
/// pushes that confirm it (a subscription that went out of order with an
/// unsubscribe is undone when its push comes for a channel nobody wants).
struct Sharded {
    conn: redis::cluster_async::ClusterConnection,
    /// Confirmed by their `ssubscribe` push.
    subscribed: HashSet<String>,
    /// Sent, not confirmed yet: when, and whether after its node dropped it
    /// (its waiters try again once it is confirmed too).
    pending: HashMap<String, (tokio::time::Instant, bool)>,
    /// How many times each wanted channel was confirmed or dropped: a
    /// probe's count taken before the latest of those tells nothing.
    changes: HashMap<String, u64>,
}

impl Sharded {
    /// A waiter joined or left `channel` (see `Waiters::tell_feeds`).
    fn requested(&mut self, w: &Waiters, channel: String) {
        let wanted = w.has_waiters(&channel);
        if wanted && self.subscribed.contains(&channel) {
            // Re-joined before its unsubscribe was processed: it never
            // stopped being subscribed.
            w.confirm(&channel, true);
        } else if wanted && !self.pending.contains_key(&channel) {
            self.subscribe(channel, false);
        } else if !wanted
            && (self.subscribed.remove(&channel) | self.pending.remove(&channel).is_some())
        {
            self.changes.remove(&channel);
            self.unsubscribe(channel);
        }
    }

    /// Sends SSUBSCRIBE. After a node dropped the channel, a read of a key
    /// of its slot goes first: redis-rs routes by the slot map it had, and
    /// that read answers MOVED from a node that no longer serves the slot (a
    /// master turned replica still serves SSUBSCRIBE, but the scripts count
    /// subscribers on the master only), which makes it refresh its map.
    fn subscribe(&mut self, channel: String, after_drop: bool) {
        let mut conn = self.conn.clone();
        let sent = channel.clone();
        tokio::spawn(async move {
            let subscribe = async {
                if after_drop {
                    let probe = redis::cmd("EXISTS").arg(&sent).to_owned();
                    let _ = probe.query_async::<i64>(&mut conn).await;
                }
                conn.ssubscribe(&sent).await
            };
            match tokio::time::timeout(CONFIRM_WITHIN * 2, subscribe).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::debug!(target: "rlock", error = %e, channel = sent, "SSUBSCRIBE failed; trying again")
                }
                Err(_) => {
                    tracing::debug!(target: "rlock", channel = sent, "SSUBSCRIBE unanswered; trying again")
                }
            }
        });
        self.pending
            .insert(channel, (tokio::time::Instant::now(), after_drop));
    }

    /// Asks the masters of the slots of some subscribed channels (the next
    /// `PROBES_AT_ONCE` from `from` on, in turn) how many subscribers they
    /// count on each (`client/heard.lua`): the count by which the scripts
    /// take a waiter in line for alive. A node that no longer serves the
    /// slot as master answers MOVED, and redis-rs refreshes its slot map
    /// and subscribes its channels again where their slots live (their
    /// waiters wake on that confirmation). But a subscription can also sit
    /// on a node that is no longer the master without redis-rs moving it: a
    /// master failed over to its replica does not always drop its
    /// subscriptions, and one dropped may land again on the old master, now
    /// a replica, through a slot map refreshed before the failover reached
    /// the node it asked. That replica hears the messages; the master,
    /// counting nobody, finds the waiters in line dead and frees the lock
    /// without a word to them. A count of 0 goes to `unheard`, with the
    /// channel's changes as they were when it was asked. Where to start
    /// next time.
    fn probe(&self, from: usize, unheard: &mpsc::UnboundedSender<(String, u64)>) -> usize {
        let channels: Vec<&String> = self.subscribed.iter().collect();
        let start = from % channels.len();
        for channel in channels
            .iter()
            .cycle()
            .skip(start)
            .take(PROBES_AT_ONCE.min(channels.len()))
        {
            let mut conn = self.conn.clone();
            let channel = (*channel).clone();
            let asked = self.changes_of(&channel);
            let unheard = unheard.clone();
            tokio::spawn(async move {
                let heard = async {
                    let call = HEARD.call(&[&channel]);
                    match call.cmd(false).query_async::<i64>(&mut conn).await {
                        Err(e) if is_noscript(&e) => call.cmd(true).query_async(&mut conn).await,
                        other => other,
                    }
                };
                if let Ok(Ok(0)) = tokio::time::timeout(CONFIRM_WITHIN, heard).await {
                    let _ = unheard.send((channel, asked));
                }
            });
        }
        start + PROBES_AT_ONCE
    }

    /// How many times `channel` was confirmed or dropped so far.
    fn changes_of(&self, channel: &str) -> u64 {
        self.changes.get(channel).copied().unwrap_or(0)
    }

    fn changed(&mut self, channel: &str) {
        *self.changes.entry(channel.to_owned()).or_default() += 1;
    }

    /// The master of `channel`'s slot counted no subscriber of it while
    /// this feed held it subscribed (see `probe`), and nothing changed
    /// since it was asked (`asked`): taken as dropped. A release may already
    /// have passed over its waiters in line, so they try again now, and
    /// again once it is subscribed where the slot lives.
    fn unheard(&mut self, w: &Waiters, channel: String, asked: u64) {
        if asked == self.changes_of(&channel) && self.subscribed.contains(&channel) {
            tracing::debug!(target: "rlock", channel, "sharded subscription not counted by its slot's master; subscribing again");
            self.dropped(w, channel);
        }
    }

    fn unsubscribe(&self, channel: String) {
        let mut conn = self.conn.clone();
        tokio::spawn(async move {
            let _ = tokio::time::timeout(CONFIRM_WITHIN, conn.sunsubscribe(&channel)).await;
        });
    }

    /// A node confirmed a subscription to `channel`: one this feed asked
    /// for, or one redis-rs made again itself after a reconnect or a slot
    /// map refresh (a release may have been missed meanwhile).
    fn confirmed(&mut self, w: &Waiters, channel: String) {
        let wanted = w.has_waiters(&channel);
        if wanted {
            self.changed(&channel);
        }
        match self.pending.remove(&channel) {
            Some((_, after_drop)) if wanted => {
                if self.subscribed.insert(channel.clone()) {
                    w.confirm(&channel, true);
                }
                if after_drop {
                    // Subscribed where the slot lives now: what was released
                    // since the drop may have gone unheard.
                    w.resubscribed(&channel);
                }
            }
            _ if self.subscribed.contains(&channel) => w.resubscribed(&channel),
            // Nobody wants it (it was left before this subscription landed).
            _ if !wanted => self.unsubscribe(channel),
            _ => {}
        }
    }

    /// An `sunsubscribe` for `channel`: when this feed did not ask for it
    /// (it forgets a channel before unsubscribing), the node stopped serving
    /// its slot; its waiters may have missed a message (they try again now,
    /// and again once it is subscribed where the slot lives), and a channel
    /// still wanted is subscribed again.
    fn dropped(&mut self, w: &Waiters, channel: String) {
        if !self.subscribed.remove(&channel) {
            return;
        }
        self.changed(&channel);
        w.confirm(&channel, false);
        if w.has_waiters(&channel) {
            tracing::debug!(target: "rlock", channel, "sharded subscription dropped by its node; subscribing again");
            w.resubscribed(&channel);
            self.subscribe(channel, true);
        } else {
            self.changes.remove(&channel);
        }
    }

    /// Sends again the subscriptions whose push did not come in time, and
    /// undoes those nobody wants any more.
    fn unconfirmed(&mut self, w: &Waiters) {
        let now = tokio::time::Instant::now();
        let late: Vec<(String, bool)> = self
            .pending
            .iter()
            .filter(|(_, (sent, _))| now >= *sent + CONFIRM_WITHIN)
            .map(|(c, (_, after_drop))| (c.clone(), *after_drop))
            .collect();
        for (channel, after_drop) in late {
            self.pending.remove(&channel);
            if w.has_waiters(&channel) {
                self.subscribe(channel, after_drop);
            } else {
                self.unsubscribe(channel);
            }
        }
    }
}
