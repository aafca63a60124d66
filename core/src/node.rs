//! One Redis endpoint the lock scripts run on: a server reached directly, the
//! master of a Sentinel group (re-resolved after a failover: redis-rs has no
//! Sentinel-aware reconnecting manager), or a whole Redis Cluster (routed by
//! slot, MOVED/ASK handled by redis-rs). Each operation is retried once when
//! the connection dropped under it, in a way that is safe to repeat.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::sentinel::SentinelClient;
use redis::{Cmd, FromRedisValue, Pipeline, RedisFuture, RedisResult, ScriptInvocation, Value};

use crate::keys::Keys;
use crate::scripts::{AcquireReply, LockState, ACQUIRE, EXTEND, INSPECT, RELEASE};

/// A connection to run one command or pipeline on.
#[derive(Clone)]
pub(crate) enum Conn {
    Manager(ConnectionManager),
    Cluster(ClusterConnection),
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Manager(c) => c.req_packed_command(cmd),
            Conn::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Manager(c) => c.req_packed_commands(pipeline, offset, count),
            Conn::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Manager(c) => c.get_db(),
            Conn::Cluster(c) => c.get_db(),
        }
    }
}

/// Where release messages of this endpoint are heard.
#[derive(Clone)]
pub(crate) enum Feed {
    /// SUBSCRIBE on a pub/sub connection to the server (or current master).
    Plain(Connector),
    /// SSUBSCRIBE through the cluster: each channel on its slot's node.
    Sharded(Arc<ClusterClient>),
}

/// Opens connections to a server, or to whichever server is the master now.
#[derive(Clone)]
pub(crate) enum Connector {
    Server(Arc<redis::Client>),
    Sentinel(Arc<SentinelRoute>),
}

impl Connector {
    pub(crate) async fn client(&self) -> RedisResult<redis::Client> {
        match self {
            Connector::Server(c) => Ok((**c).clone()),
            Connector::Sentinel(s) => s.sentinel.lock().await.async_get_client().await,
        }
    }
}

/// A Sentinel group's current master, found again after a failover.
pub(crate) struct SentinelRoute {
    sentinel: tokio::sync::Mutex<SentinelClient>,
    master: Mutex<Option<ConnectionManager>>,
    config: ConnectionManagerConfig,
}

impl SentinelRoute {
    async fn conn(&self) -> RedisResult<ConnectionManager> {
        if let Some(c) = self.master.lock().unwrap().clone() {
            return Ok(c);
        }
        // One resolution at a time; a caller that waited finds it done.
        let mut sentinel = self.sentinel.lock().await;
        if let Some(c) = self.master.lock().unwrap().clone() {
            return Ok(c);
        }
        let client = sentinel.async_get_client().await?;
        let conn = ConnectionManager::new_with_config(client, self.config.clone()).await?;
        tracing::debug!("resolved the master through Sentinel");
        *self.master.lock().unwrap() = Some(conn.clone());
        Ok(conn)
    }

    fn forget_master(&self) {
        self.master.lock().unwrap().take();
    }
}

enum Route {
    Direct(ConnectionManager, Arc<redis::Client>),
    Sentinel(Arc<SentinelRoute>),
    Cluster(ClusterConnection, Arc<ClusterClient>),
}

/// What to connect to.
pub(crate) enum Endpoint {
    Server(redis::Client),
    Sentinel(SentinelClient),
    Cluster(ClusterClient),
}

/// One endpoint: its connection, and how its release messages are heard.
pub(crate) struct Node {
    route: Route,
    /// The endpoint as text, without credentials (for errors and logs).
    pub(crate) label: String,
}

/// How long a `WAIT` for replicas may take after an acquire or extend.
fn wait_timeout(lease_ms: u64) -> u64 {
    (lease_ms / 4).clamp(1, 1000)
}

impl Node {
    pub(crate) async fn connect(
        endpoint: Endpoint,
        label: String,
        config: ConnectionManagerConfig,
    ) -> RedisResult<Node> {
        let route = match endpoint {
            Endpoint::Server(client) => {
                let conn = ConnectionManager::new_with_config(client.clone(), config).await?;
                Route::Direct(conn, Arc::new(client))
            }
            Endpoint::Sentinel(sentinel) => {
                let route = Arc::new(SentinelRoute {
                    sentinel: tokio::sync::Mutex::new(sentinel),
                    master: Mutex::new(None),
                    config,
                });
                route.conn().await?;
                Route::Sentinel(route)
            }
            Endpoint::Cluster(client) => {
                let conn = client.get_async_connection().await?;
                Route::Cluster(conn, Arc::new(client))
            }
        };
        Ok(Node { route, label })
    }

    async fn conn(&self) -> RedisResult<Conn> {
        match &self.route {
            Route::Direct(c, _) => Ok(Conn::Manager(c.clone())),
            Route::Sentinel(s) => s.conn().await.map(Conn::Manager),
            Route::Cluster(c, _) => Ok(Conn::Cluster(c.clone())),
        }
    }

    /// After a failed request: a Sentinel master that dropped the connection
    /// or turned read-only is resolved again on the next request.
    fn failed(&self, e: &redis::RedisError) {
        if let Route::Sentinel(s) = &self.route {
            if is_transient(e) {
                s.forget_master();
            }
        }
    }

    /// The command `release.lua` announces a release with.
    pub(crate) fn publish_command(&self) -> &'static str {
        match self.route {
            Route::Cluster(..) => "SPUBLISH",
            _ => "PUBLISH",
        }
    }

    pub(crate) fn feed(&self) -> Feed {
        match &self.route {
            Route::Direct(_, client) => Feed::Plain(Connector::Server(client.clone())),
            Route::Sentinel(s) => Feed::Plain(Connector::Sentinel(s.clone())),
            Route::Cluster(_, client) => Feed::Sharded(client.clone()),
        }
    }

    async fn call<T: FromRedisValue>(&self, inv: &ScriptInvocation<'_>) -> RedisResult<T> {
        let mut conn = self.conn().await?;
        let r = inv.invoke_async(&mut conn).await;
        if let Err(e) = &r {
            self.failed(e);
        }
        r
    }

    /// Runs a script, then `WAIT replicas` in the same round trip.
    async fn call_synced<T: FromRedisValue>(
        &self,
        inv: &ScriptInvocation<'_>,
        script: &redis::Script,
        replicas: u32,
        lease_ms: u64,
    ) -> RedisResult<(T, u32)> {
        let mut conn = self.conn().await?;
        let pipe = || {
            let mut p = redis::pipe();
            p.invoke_script(inv)
                .cmd("WAIT")
                .arg(replicas)
                .arg(wait_timeout(lease_ms));
            p
        };
        let r = match pipe().query_async(&mut conn).await {
            Err(e) if is_noscript(&e) => {
                script.prepare_invoke().load_async(&mut conn).await?;
                pipe().query_async(&mut conn).await
            }
            other => other,
        };
        if let Err(e) = &r {
            self.failed(e);
        }
        r
    }

    /// `acquire.lua`; on a dropped connection, retried once telling the script
    /// how many re-entries the owner had (`believed`), so a first request that
    /// was applied is not counted twice. `idempotent` tells it from the first
    /// request (Redlock: a node may still hold what an earlier failed attempt
    /// of this owner left there). With `replicas`, also the number of
    /// replicas that acknowledged.
    pub(crate) async fn acquire(
        &self,
        keys: &Keys,
        owner: &str,
        lease_ms: u64,
        believed: u32,
        idempotent: bool,
        replicas: Option<u32>,
    ) -> RedisResult<(AcquireReply, Option<u32>)> {
        let inv = |retry_after: i64| {
            let mut inv = ACQUIRE.key(&keys.lock);
            inv.key(&keys.fence)
                .arg(owner)
                .arg(lease_ms)
                .arg(retry_after);
            inv
        };
        let run = |retry_after: i64| async move {
            match replicas {
                None => self
                    .call::<Vec<i64>>(&inv(retry_after))
                    .await
                    .map(|v| (v, None)),
                Some(k) => self
                    .call_synced::<Vec<i64>>(&inv(retry_after), &ACQUIRE, k, lease_ms)
                    .await
                    .map(|(v, acked)| (v, Some(acked))),
            }
        };
        let first = if idempotent { i64::from(believed) } else { -1 };
        let (reply, acked) = match run(first).await {
            Err(e) if is_transient(&e) => run(i64::from(believed)).await?,
            other => other?,
        };
        let reply = AcquireReply::parse(&reply).ok_or_else(|| unexpected("acquire", &reply))?;
        Ok((reply, acked))
    }

    /// `release.lua`: re-entries left, or -1 gone / -2 another owner. A retried
    /// last release that finds the key gone while `last_valid` (the holder's
    /// lease had not ended) counts as released: the lost request deleted it.
    pub(crate) async fn release(
        &self,
        keys: &Keys,
        owner: &str,
        lease_ms: u64,
        last_valid: bool,
    ) -> RedisResult<i64> {
        let mut inv = RELEASE.key(&keys.lock);
        inv.key(&keys.channel)
            .arg(owner)
            .arg(lease_ms)
            .arg(self.publish_command());
        match self.call::<i64>(&inv).await {
            Err(e) if is_transient(&e) => match self.call::<i64>(&inv).await? {
                -1 if last_valid => Ok(0),
                other => Ok(other),
            },
            other => other,
        }
    }

    /// `extend.lua` (idempotent, so retried once as is): 1, -1 gone, -2 another
    /// owner; with `replicas`, also how many replicas acknowledged.
    pub(crate) async fn extend(
        &self,
        keys: &Keys,
        owner: &str,
        lease_ms: u64,
        replicas: Option<u32>,
    ) -> RedisResult<(i64, Option<u32>)> {
        let mut inv = EXTEND.key(&keys.lock);
        inv.arg(owner).arg(lease_ms);
        let run = || async {
            match replicas {
                None => self.call::<i64>(&inv).await.map(|v| (v, None)),
                Some(k) => self
                    .call_synced::<i64>(&inv, &EXTEND, k, lease_ms)
                    .await
                    .map(|(v, acked)| (v, Some(acked))),
            }
        };
        match run().await {
            Err(e) if is_transient(&e) => run().await,
            other => other,
        }
    }

    /// `inspect.lua`.
    pub(crate) async fn inspect(&self, keys: &Keys) -> RedisResult<LockState> {
        let mut inv = INSPECT.key(&keys.lock);
        inv.key(&keys.fence);
        let reply = match self.call(&inv).await {
            Err(e) if is_transient(&e) => self.call(&inv).await?,
            other => other?,
        };
        Ok(LockState::from_reply(reply))
    }

    /// Extends many holdings at once: one pipeline on a server; on a cluster,
    /// concurrent requests that redis-rs batches per node connection, each on
    /// its own (a stalled node delays only its own slots). `None` for each
    /// extension whose outcome is unknown by `deadline`.
    pub(crate) async fn extend_many(
        &self,
        batch: &[(&str, &str, u64)],
        deadline: tokio::time::Instant,
    ) -> Vec<Option<i64>> {
        let Ok(Ok(mut conn)) = tokio::time::timeout_at(deadline, self.conn()).await else {
            return vec![None; batch.len()];
        };
        if let Conn::Cluster(_) = conn {
            let calls = batch.iter().map(|(key, owner, lease_ms)| {
                let mut conn = conn.clone();
                async move {
                    let mut inv = EXTEND.key(*key);
                    inv.arg(*owner).arg(*lease_ms);
                    let call = inv.invoke_async::<i64>(&mut conn);
                    tokio::time::timeout_at(deadline, call).await.ok()?.ok()
                }
            });
            return futures_util::future::join_all(calls).await;
        }
        let pipe = || {
            let mut pipe = redis::pipe();
            for (key, owner, lease_ms) in batch {
                pipe.invoke_script(EXTEND.key(*key).arg(*owner).arg(*lease_ms));
            }
            pipe
        };
        let run = async {
            match pipe().query_async(&mut conn).await {
                Err(e) if is_noscript(&e) => {
                    EXTEND.prepare_invoke().load_async(&mut conn).await?;
                    pipe().query_async(&mut conn).await
                }
                other => other,
            }
        };
        let r: RedisResult<Vec<i64>> = tokio::time::timeout_at(deadline, run)
            .await
            .unwrap_or_else(|_| Err((redis::ErrorKind::Io, "renewal outlived the lease").into()));
        match r {
            Ok(v) => v.into_iter().map(Some).collect(),
            Err(e) => {
                self.failed(&e);
                tracing::debug!(error = %e, n = batch.len(), node = %self.label, "renewal failed");
                vec![None; batch.len()]
            }
        }
    }
}

/// Whether an error may mean the request never took effect because the
/// connection dropped (or the server stopped being the master), so one retry
/// on a fresh connection is worth it.
pub(crate) fn is_transient(e: &redis::RedisError) -> bool {
    e.is_io_error()
        || e.is_connection_dropped()
        || e.is_unrecoverable_error()
        || e.is_timeout()
        || e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::ReadOnly)
}

fn is_noscript(e: &redis::RedisError) -> bool {
    e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript)
}

fn unexpected(what: &str, reply: &[i64]) -> redis::RedisError {
    redis::RedisError::from((
        redis::ErrorKind::Parse,
        "unexpected script reply",
        format!("{what}: {reply:?}"),
    ))
}

/// Redis' own default is no timeout: bound every request so a stalled server
/// fails into the reconnect path instead of hanging a lock operation.
pub(crate) fn manager_config(connect: Duration, response: Duration) -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_connection_timeout(Some(connect))
        .set_response_timeout(Some(response))
        .set_number_of_retries(2)
        .set_min_delay(Duration::from_millis(50))
        .set_max_delay(Duration::from_millis(500))
}
