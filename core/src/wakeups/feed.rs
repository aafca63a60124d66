//! Feeds: the pub/sub connections that hear release messages, one per Redis
//! endpoint of a client (one for a server or a Cluster, one per master in
//! Redlock mode), started on the client's first wait. Each keeps its
//! subscriptions in line with the waiters registry and hands every message to
//! `Waiters::deliver`; each ends when the client is dropped.

use std::collections::HashSet;
use std::sync::{Arc, Weak};
use std::time::Duration;

use futures_util::StreamExt;
use redis::{PushKind, Value};
use tokio::sync::mpsc;

use super::registry::Waiters;
use crate::redis::endpoint::{Connector, Feed};
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
/// node and re-subscribes after reconnects and slot moves, announcing each
/// re-subscription with a push; that push is also the cue that messages may
/// have been missed.
async fn run_sharded(
    cluster: std::sync::Arc<redis::cluster::ClusterClient>,
    waiters: Weak<Waiters>,
    mut requests: mpsc::UnboundedReceiver<String>,
    mut shutdown: Shutdown,
) {
    let (tx, mut pushes) = mpsc::unbounded_channel();
    let mut conn = loop {
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
    let mut subscribed: HashSet<String> = HashSet::new();
    loop {
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
                    // A (re-)subscription confirmed after a reconnect or a slot
                    // move: a release may have been missed meanwhile.
                    PushKind::SSubscribe if subscribed.contains(&channel) => w.resubscribed(&channel),
                    _ => {}
                }
            }
            channel = requests.recv() => {
                let Some(channel) = channel else { return };
                let Some(w) = waiters.upgrade() else { return };
                let wanted = w.has_waiters(&channel);
                let have = subscribed.contains(&channel);
                if wanted && !have {
                    match conn.ssubscribe(&channel).await {
                        Ok(()) => {
                            subscribed.insert(channel.clone());
                        }
                        Err(e) => tracing::debug!(target: "rlock", error = %e, "SSUBSCRIBE failed"),
                    }
                } else if !wanted && have {
                    subscribed.remove(&channel);
                    let _ = conn.sunsubscribe(&channel).await;
                }
                if wanted && subscribed.contains(&channel) {
                    w.confirm(&channel, true);
                }
            }
        }
    }
}
