//! One Redis endpoint the lock scripts run on: a server reached directly, the
//! master of a Sentinel group (re-resolved after a failover: redis-rs has no
//! Sentinel-aware reconnecting manager), or a whole Redis Cluster (routed by
//! slot, MOVED/ASK handled by redis-rs). Each operation is retried once when
//! the connection dropped under it, in a way that is safe to repeat.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::sentinel::SentinelClient;
use redis::{
    AsyncConnectionConfig, Cmd, FromRedisValue, Pipeline, RedisFuture, RedisResult, Value,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::scripts::{
    is_noscript, many, AcquireReply, Call, InspectReply, LockState, ManyHolderState, ACQUIRE,
    DEQUEUE, EXTEND, INSPECT, LINE_SHOWN, RELEASE,
};
use crate::keys::Keys;
use crate::kind::Kind;
use crate::telemetry::Telemetry;

/// One acquire request.
pub(crate) struct AcquireRequest<'a> {
    pub keys: &'a Keys,
    pub owner: &'a str,
    pub lease: Duration,
    /// Re-entries this owner believes it holds: 0 when its last holding
    /// was lost or abandoned (a release Redis did not answer), which may
    /// still stand in Redis and then is not counted as a re-entry.
    pub believed: u32,
    /// Join the waiting line when busy.
    pub enter_line: bool,
    /// Replicas that must acknowledge (`WAIT`), if asked.
    pub replicas: Option<u32>,
    /// What is asked (a side of a read-write lock, permits).
    pub kind: Kind,
    /// Fair mode: nobody passes a waiter in line (read-write locks and
    /// semaphores decide it in Redis; the mutex in its wait).
    pub fair: bool,
    /// Owners of this client that left the line without Redis confirming
    /// it: taken out of it before anything else.
    pub left: &'a [String],
}

/// What a release is meant to undo: the holder's view, carried by every
/// send of the request (see `release.lua`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReleaseOf {
    /// The re-entries the holder believes it has before this release
    /// (-1: unknown, apply as is).
    pub before: i64,
    /// The fencing token of the holding to release (0: whichever this owner
    /// holds).
    pub fence: u64,
    /// A last release: when the holder's lease ends by its own clock.
    pub last_valid_until: Option<tokio::time::Instant>,
    /// An operator's forced release, sent as the holder (a mutex's only).
    pub forced: bool,
    /// A Redlock attempt that fell short gives back what it got: a lock it
    /// frees is announced as a give-back (see `release.lua`), which wakes
    /// waiters only after a pause.
    pub given_back: bool,
}

impl ReleaseOf {
    /// Whatever this owner holds, one re-entry: a give-back right after an
    /// acquisition that must not stand.
    pub(crate) const ANY: ReleaseOf = ReleaseOf {
        before: -1,
        fence: 0,
        last_valid_until: None,
        forced: false,
        given_back: false,
    };

    /// [`ANY`](Self::ANY), from a Redlock attempt that fell short.
    pub(crate) const GIVEN_BACK: ReleaseOf = ReleaseOf {
        given_back: true,
        ..Self::ANY
    };

    /// The grant with token `fence`, which its owner never used (a handoff to
    /// a waiter that left): passed on, and no later holding of that owner.
    pub(crate) fn grant(fence: u64) -> Self {
        Self::undo(fence, 1)
    }

    /// Undoes the acquisition that answered `fence` and `count` (one that
    /// must not stand: too few replicas, a closing client), and nothing
    /// else if this request is sent again or arrives late.
    pub(crate) fn undo(fence: u64, count: u32) -> Self {
        ReleaseOf {
            before: i64::from(count),
            fence,
            ..Self::ANY
        }
    }
}

/// A connection to run one command or pipeline on.
#[derive(Clone)]
pub(crate) enum Conn {
    Manager(ConnectionManager),
    Cluster(ClusterConnection),
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        let reply = match self {
            Conn::Manager(c) => c.req_packed_command(cmd),
            Conn::Cluster(c) => c.req_packed_command(cmd),
        };
        Box::pin(crate::face_support::spin::awaited(reply))
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        let replies = match self {
            Conn::Manager(c) => c.req_packed_commands(pipeline, offset, count),
            Conn::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        };
        Box::pin(crate::face_support::spin::awaited(replies))
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

/// A connection that is rebuilt from scratch after it failed: a Sentinel
/// group's master (resolved again after a failover), or a Cluster connection
/// (redis-rs' own recovery can stay wedged after a master dies; a fresh
/// connection reads the new topology).
struct Rebuilt<T> {
    current: Mutex<Option<(T, Instant)>>,
    building: tokio::sync::Mutex<()>,
}

/// A connection younger than this is not rebuilt again: failures right after
/// a rebuild are the outage itself, not a wedged connection.
const REBUILD_AFTER: Duration = Duration::from_millis(500);

impl<T: Clone> Rebuilt<T> {
    fn new(first: T) -> Self {
        Rebuilt {
            current: Mutex::new(Some((first, Instant::now()))),
            building: tokio::sync::Mutex::new(()),
        }
    }

    async fn get<F, Fut>(&self, make: F) -> RedisResult<T>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = RedisResult<T>>,
    {
        if let Some((c, _)) = self.current.lock().unwrap().clone() {
            return Ok(c);
        }
        // One rebuild at a time; a caller that waited finds it done.
        let _building = self.building.lock().await;
        if let Some((c, _)) = self.current.lock().unwrap().clone() {
            return Ok(c);
        }
        let conn = make().await?;
        *self.current.lock().unwrap() = Some((conn.clone(), Instant::now()));
        Ok(conn)
    }

    fn forget(&self) {
        let mut current = self.current.lock().unwrap();
        if current
            .as_ref()
            .is_some_and(|(_, at)| at.elapsed() >= REBUILD_AFTER)
        {
            tracing::debug!(target: "rlock", "dropping a failed connection; the next request makes a new one");
            *current = None;
        }
    }
}

/// A Sentinel group's current master, found again after a failover.
pub(crate) struct SentinelRoute {
    sentinel: tokio::sync::Mutex<SentinelClient>,
    master: Rebuilt<ConnectionManager>,
    config: ConnectionManagerConfig,
    /// The master's `host:port` as last resolved, for errors to name it;
    /// `None` while the Sentinels themselves fail.
    address: Mutex<Option<String>>,
}

impl SentinelRoute {
    /// The master's address, noted for errors, and a client for it.
    async fn master_client(
        sentinel: &tokio::sync::Mutex<SentinelClient>,
        address: &Mutex<Option<String>>,
    ) -> RedisResult<redis::Client> {
        let client = sentinel.lock().await.async_get_client().await;
        *address.lock().unwrap() = client.as_ref().ok().map(server_of);
        client
    }

    async fn resolve(&self) -> RedisResult<ConnectionManager> {
        let client = Self::master_client(&self.sentinel, &self.address).await?;
        let conn = ConnectionManager::new_with_config(client, self.config.clone()).await?;
        tracing::debug!(target: "rlock", "resolved the master through Sentinel");
        Ok(conn)
    }

    async fn conn(&self) -> RedisResult<ConnectionManager> {
        self.master.get(|| self.resolve()).await
    }
}

enum Route {
    Direct(ConnectionManager, Arc<redis::Client>),
    Sentinel(Arc<SentinelRoute>),
    Cluster(Box<ClusterRoute>),
}

struct ClusterRoute {
    conn: Rebuilt<ClusterConnection>,
    commands: ClusterClient,
    feed: Arc<ClusterClient>,
}

/// What to connect to.
pub(crate) enum Endpoint {
    Server(Box<redis::Client>),
    Sentinel(Box<SentinelClient>),
    Cluster {
        commands: Box<ClusterClient>,
        feed: Box<ClusterClient>,
    },
}

/// One member of a deployment, connected: a server, a Sentinel-watched
/// master or a whole Cluster (a Redlock deployment has one per master). Its
/// connection, and how its release messages are heard.
pub(crate) struct Member {
    route: Route,
    /// The endpoint as text, without credentials (for errors and logs):
    /// `host:port`, or the Sentinels or Cluster seeds it was given.
    pub(crate) label: String,
    /// Where a lost connection is told.
    telemetry: Arc<Telemetry>,
}

/// A server's `host:port`, as errors name it.
fn server_of(client: &redis::Client) -> String {
    match client.get_connection_info().addr() {
        redis::ConnectionAddr::Tcp(host, port)
        | redis::ConnectionAddr::TcpTls { host, port, .. }
            if host.contains(':') =>
        {
            format!("[{host}]:{port}")
        }
        addr => addr.to_string(),
    }
}

/// A connection manager whose first connection fails fast where it cannot
/// succeed: a server that refuses it (or answers as no Redis does) fails in
/// a few milliseconds, not after the back-off between the manager's tries
/// (about 270 ms), which is meant for reconnecting (a connection that
/// dropped, to a server that may be restarting, is still tried again as
/// before). One direct try runs beside the manager's: the manager's answer
/// is the answer, unless the direct try first finds the connection refused
/// or the server no Redis; any other failure of the direct try (the
/// server's last free connection taken by the manager, say) waits for the
/// manager, and a manager that failed beside a direct try that succeeded
/// tries once more. A server that answers costs no extra round trip.
async fn first_connection(
    client: &redis::Client,
    config: ConnectionManagerConfig,
) -> RedisResult<ConnectionManager> {
    let once = AsyncConnectionConfig::new()
        .set_connection_timeout(config.connection_timeout())
        .set_response_timeout(config.response_timeout());
    let within = config.connection_timeout();
    let tried = client.get_multiplexed_async_connection_with_config(&once);
    let managed = ConnectionManager::new_with_config(client.clone(), config.clone());
    tokio::pin!(tried, managed);
    let decisive =
        |e: &redis::RedisError| e.kind() == redis::ErrorKind::Parse || e.is_connection_refusal();
    let first = tokio::select! {
        managed = &mut managed => managed,
        tried = &mut tried => match tried {
            Err(e) if decisive(&e) => Err(e),
            Err(_) => managed.await,
            // The direct try may have taken the server's last free connection
            // from the manager: closed, it leaves that connection to the
            // manager's second attempt.
            Ok(direct) => {
                drop(direct);
                match managed.await {
                    Ok(conn) => Ok(conn),
                    Err(_) => ConnectionManager::new_with_config(client.clone(), config).await,
                }
            }
        },
    };
    match first {
        Ok(conn) => Ok(conn),
        Err(e) => Err(not_redis(e, client, within).await),
    }
}

/// `e`, a failure of `client`'s first exchange with its server, said in
/// one line when the server did not answer as Redis does (an HTTP server on
/// that port, say): redis-rs reports its parser's position and the raw byte
/// codes over several lines. The line names what the server sends first.
async fn not_redis(
    e: redis::RedisError,
    client: &redis::Client,
    within: Option<Duration>,
) -> redis::RedisError {
    if e.kind() != redis::ErrorKind::Parse {
        return e;
    }
    let within = within.unwrap_or(Duration::from_secs(1));
    let sent = match first_line(client, within).await {
        Some(line) => format!(" (it sent {line:?} first)"),
        None => String::new(),
    };
    std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!("the server did not answer as Redis does{sent}: is it a Redis server?"),
    )
    .into()
}

/// The first line that `client`'s server sends back to a PING over plain
/// TCP, printable and cut to 60 characters; `None` over TLS, or when it
/// sends nothing within `within`.
async fn first_line(client: &redis::Client, within: Duration) -> Option<String> {
    let redis::ConnectionAddr::Tcp(host, port) = client.get_connection_info().addr() else {
        return None;
    };
    let read = async {
        let mut stream = tokio::net::TcpStream::connect((host.as_str(), *port))
            .await
            .ok()?;
        stream.write_all(b"*1\r\n$4\r\nPING\r\n").await.ok()?;
        let mut buf = [0u8; 256];
        let mut n = 0;
        while n < buf.len() && !buf[..n].contains(&b'\n') {
            match stream.read(&mut buf[n..]).await.ok()? {
                0 => break,
                k => n += k,
            }
        }
        Some(buf[..n].to_vec())
    };
    let sent = tokio::time::timeout(within, read).await.ok()??;
    let line = sent.split(|b| *b == b'\r' || *b == b'\n').next()?;
    let line = String::from_utf8_lossy(line);
    let mut shown: String = line.chars().take(60).collect();
    if line.chars().count() > 60 {
        shown.push('…');
    }
    (!shown.is_empty()).then_some(shown)
}

/// How long a `WAIT` for replicas may take after an acquire or extend.
fn wait_timeout(lease_ms: u64) -> u64 {
    (lease_ms / 4).clamp(1, 1000)
}

impl Member {
    /// Connects; a `lazy` server endpoint connects on its first request
    /// instead (Redlock: one master being down must not stop the client).
    /// A failure comes with the server it happened at (see [`Member::server`]).
    pub(crate) async fn connect(
        endpoint: Endpoint,
        label: String,
        config: ConnectionManagerConfig,
        lazy: bool,
        telemetry: Arc<Telemetry>,
    ) -> Result<Member, (redis::RedisError, String)> {
        let route = match endpoint {
            Endpoint::Server(client) => {
                let conn = if lazy {
                    ConnectionManager::new_lazy_with_config((*client).clone(), config)
                } else {
                    first_connection(&client, config).await
                };
                Route::Direct(conn.map_err(|e| (e, label.clone()))?, Arc::new(*client))
            }
            Endpoint::Sentinel(sentinel) => {
                let sentinel = tokio::sync::Mutex::new(*sentinel);
                let address = Mutex::new(None);
                let first = async {
                    let client = SentinelRoute::master_client(&sentinel, &address).await?;
                    first_connection(&client, config.clone()).await
                };
                let first = first
                    .await
                    .map_err(|e| (e, Self::server_in(&label, &address)))?;
                Route::Sentinel(Arc::new(SentinelRoute {
                    sentinel,
                    master: Rebuilt::new(first),
                    config,
                    address,
                }))
            }
            Endpoint::Cluster { commands, feed } => Route::Cluster(Box::new(ClusterRoute {
                conn: Rebuilt::new(
                    commands
                        .get_async_connection()
                        .await
                        .map_err(|e| (e, label.clone()))?,
                ),
                commands: *commands,
                feed: Arc::new(*feed),
            })),
        };
        Ok(Member {
            route,
            label,
            telemetry,
        })
    }

    /// The server a failure of this endpoint happened at, as errors name it:
    /// its address; for a Sentinel group, the master last resolved (or the
    /// Sentinels, while they fail).
    pub(crate) fn server(&self) -> String {
        match &self.route {
            Route::Sentinel(s) => Self::server_in(&self.label, &s.address),
            _ => self.label.clone(),
        }
    }

    fn server_in(label: &str, master: &Mutex<Option<String>>) -> String {
        match &*master.lock().unwrap() {
            Some(address) => format!("{address} (the master, from {label})"),
            None => label.to_owned(),
        }
    }

    pub(super) async fn conn(&self) -> RedisResult<Conn> {
        match &self.route {
            Route::Direct(c, _) => Ok(Conn::Manager(c.clone())),
            Route::Sentinel(s) => s.conn().await.map(Conn::Manager),
            Route::Cluster(c) => c
                .conn
                .get(|| c.commands.get_async_connection())
                .await
                .map(Conn::Cluster),
        }
    }

    /// After a failed request: a Sentinel master that dropped the connection
    /// or turned read-only is resolved again, and a Cluster connection made
    /// anew, on the next request.
    pub(super) fn failed(&self, e: &redis::RedisError) {
        if !is_transient(e) {
            return;
        }
        self.telemetry.connection_lost(&self.server(), e);
        match &self.route {
            Route::Sentinel(s) => s.master.forget(),
            Route::Cluster(c) => c.conn.forget(),
            Route::Direct(..) => {}
        }
    }

    /// One PING: whether the endpoint answers now (and as Redis does).
    pub(crate) async fn ping(&self) -> RedisResult<()> {
        let mut conn = self.conn().await?;
        let pong = redis::cmd("PING").query_async::<String>(&mut conn).await;
        match (pong, &self.route) {
            (Err(e), Route::Direct(_, client)) => Err(not_redis(e, client, None).await),
            (pong, _) => pong.map(|_| ()),
        }
    }

    /// Whether a node serves sharded pub/sub (Redis 7.0 and later, Valkey),
    /// which a Cluster's releases and waiters use: false only when it says
    /// it does not know `SPUBLISH` (`COMMAND INFO` answers nil for a command
    /// it does not know). Asked of any one node (redis-rs would route by the
    /// word INFO taken for a key); a refusal of `COMMAND` itself (an ACL
    /// without it, the command renamed) tells nothing, and counts as yes.
    pub(crate) async fn sharded_pubsub(&self) -> RedisResult<bool> {
        let Route::Cluster(cluster) = &self.route else {
            return Ok(true);
        };
        let mut probe = redis::cmd("COMMAND");
        probe.arg("INFO").arg("SPUBLISH");
        let any = RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random);
        let mut conn = cluster
            .conn
            .get(|| cluster.commands.get_async_connection())
            .await?;
        match conn.route_command(probe, any).await {
            Ok(redis::Value::Array(commands)) => {
                Ok(!matches!(commands.as_slice(), [redis::Value::Nil]))
            }
            Ok(_) => Ok(true),
            Err(e) if is_transient(&e) => Err(e),
            Err(e) => {
                tracing::warn!(target: "rlock", error = %e, "could not ask the Cluster whether it has sharded pub/sub (Redis 7.0 or later): assuming it has");
                Ok(true)
            }
        }
    }

    /// The command `release.lua` announces a release with.
    pub(crate) fn publish_command(&self) -> &'static str {
        match self.route {
            Route::Cluster(_) => "SPUBLISH",
            _ => "PUBLISH",
        }
    }

    /// How scripts count a channel's subscribers (a waiter in line's liveness):
    /// sharded channels on a Cluster.
    fn numsub_command(&self) -> &'static str {
        match self.route {
            Route::Cluster(_) => "SHARDNUMSUB",
            _ => "NUMSUB",
        }
    }

    pub(crate) fn feed(&self) -> Feed {
        match &self.route {
            Route::Direct(_, client) => Feed::Plain(Connector::Server(client.clone())),
            Route::Sentinel(s) => Feed::Plain(Connector::Sentinel(s.clone())),
            Route::Cluster(c) => Feed::Sharded(c.feed.clone()),
        }
    }

    pub(super) async fn call<T: FromRedisValue>(&self, call: &Call<'_>) -> RedisResult<T> {
        let mut conn = self.conn().await?;
        let r = match call.cmd(false).query_async(&mut conn).await {
            Err(e) if is_noscript(&e) => call.cmd(true).query_async(&mut conn).await,
            other => other,
        };
        if let Err(e) = &r {
            self.failed(e);
        }
        r
    }

    /// Runs a script, then `WAIT replicas` in the same round trip.
    async fn call_synced<T: FromRedisValue>(
        &self,
        call: &Call<'_>,
        replicas: u32,
        lease_ms: u64,
    ) -> RedisResult<(T, u32)> {
        let mut conn = self.conn().await?;
        let pipe = |eval: bool| {
            let mut p = redis::pipe();
            p.add_command(call.cmd(eval))
                .cmd("WAIT")
                .arg(replicas)
                .arg(wait_timeout(lease_ms));
            p
        };
        let r = match pipe(false).query_async(&mut conn).await {
            Err(e) if is_noscript(&e) => pipe(true).query_async(&mut conn).await,
            other => other,
        };
        if let Err(e) = &r {
            self.failed(e);
        }
        r
    }

    /// `acquire.lua`, carrying the re-entries this owner believes it holds
    /// (`believed`) on every send: a request that was applied already (its
    /// reply lost, the lock handed to this waiter meanwhile, or a Redlock
    /// master still holding what an earlier failed attempt left) is not
    /// counted twice, so on a dropped connection it is sent again as it is.
    /// With `replicas`, also the number of replicas that acknowledged.
    pub(crate) async fn acquire(
        &self,
        req: &AcquireRequest<'_>,
    ) -> RedisResult<(AcquireReply, Option<u32>)> {
        let keys = req.keys;
        let lease_ms = req.lease.as_millis() as u64;
        let many_holder = keys.family.is_many_holder();
        let mutex_keys = [
            keys.lock.as_str(),
            &keys.fence,
            &keys.queue,
            &keys.leases,
            &keys.legacy_fence,
        ];
        let mut call = match many_holder {
            true => many::ACQUIRE.call(&many_holder_keys(keys)),
            false => ACQUIRE.call(&mutex_keys),
        }
        .arg(req.owner)
        .arg(lease_ms)
        .arg(i64::from(req.believed))
        .arg(if req.enter_line { "1" } else { "0" })
        .arg(&keys.waiter_prefix)
        .arg(self.numsub_command())
        .arg(self.publish_command());
        if many_holder {
            let (take, size) = req.kind.asked();
            call = call
                .arg(take)
                .arg(size)
                .arg(if req.fair { "1" } else { "0" });
        }
        let call = call.arg(req.left);
        let run = || async {
            match req.replicas {
                None => self.call::<Vec<i64>>(&call).await.map(|v| (v, None)),
                Some(k) => self
                    .call_synced::<Vec<i64>>(&call, k, lease_ms)
                    .await
                    .map(|(v, acked)| (v, Some(acked))),
            }
        };
        let (reply, acked) = match run().await {
            Err(e) if is_transient(&e) => run().await?,
            other => other?,
        };
        let reply = AcquireReply::parse(&reply).ok_or_else(|| unexpected("acquire", &reply))?;
        Ok((reply, acked))
    }

    /// `release.lua`: re-entries left, or -1 gone / -2 another owner. The
    /// request carries the holder's view (`of`), so one sent again after a
    /// lost reply is answered, not applied twice (a last release that handed
    /// the lock over is recognised by the new holding, which names it); a
    /// last release sent again that finds the key gone or someone else's
    /// before the holder's lease ended counts as released: only its own
    /// first send could have ended a holding whose lease still ran (the new
    /// holder may have passed it on already).
    pub(crate) async fn release(
        &self,
        keys: &Keys,
        owner: &str,
        lease_ms: u64,
        of: ReleaseOf,
    ) -> RedisResult<i64> {
        let call = match keys.family.is_many_holder() {
            true => many::RELEASE.call(&many_holder_keys(keys)),
            false => RELEASE.call(&[
                &keys.lock,
                &keys.channel,
                &keys.fence,
                &keys.queue,
                &keys.leases,
                &keys.legacy_fence,
                &keys.forced,
            ]),
        }
        .arg(owner)
        .arg(lease_ms)
        .arg(self.publish_command())
        .arg(&keys.waiter_prefix)
        .arg(self.numsub_command())
        .arg(of.before)
        .arg(of.fence)
        .arg(if of.forced { "1" } else { "0" })
        .arg(if of.given_back { "1" } else { "0" });
        let released_earlier = |v: i64| {
            matches!(v, -1 | -2)
                && of
                    .last_valid_until
                    .is_some_and(|t| tokio::time::Instant::now() < t)
        };
        // redis-rs sends a request again itself on a Cluster (after a
        // reset, or a MOVED), so even a first answer may be a resend's.
        let resends_itself = matches!(self.route, Route::Cluster(_));
        match self.call::<i64>(&call).await {
            Err(e) if is_transient(&e) => match self.call::<i64>(&call).await? {
                v if released_earlier(v) => Ok(0),
                other => Ok(other),
            },
            Ok(v) if resends_itself && released_earlier(v) => Ok(0),
            other => other,
        }
    }

    /// `dequeue.lua` (idempotent): a waiter leaves the line; the fencing token
    /// when the lock had been handed to it meanwhile.
    pub(crate) async fn dequeue(&self, keys: &Keys, owner: &str) -> RedisResult<Option<u64>> {
        let call = match keys.family.is_many_holder() {
            true => many::DEQUEUE
                .call(&many_holder_keys(keys))
                .arg(owner)
                .arg(self.publish_command())
                .arg(&keys.waiter_prefix)
                .arg(self.numsub_command()),
            false => DEQUEUE
                .call(&[&keys.lock, &keys.queue, &keys.leases])
                .arg(owner),
        };
        let handed = |fence: i64| u64::try_from(fence).ok().filter(|f| *f > 0);
        match self.call::<i64>(&call).await {
            Err(e) if is_transient(&e) => self.call::<i64>(&call).await.map(handed),
            other => other.map(handed),
        }
    }

    /// `extend.lua` (idempotent, so retried once as is): 1, -1 gone, -2 another
    /// owner (or this owner's holding under another token than `fence`,
    /// unless that is 0); with `replicas`, also how many replicas
    /// acknowledged.
    pub(crate) async fn extend(
        &self,
        keys: &Keys,
        owner: &str,
        lease_ms: u64,
        replicas: Option<u32>,
        fence: u64,
    ) -> RedisResult<(i64, Option<u32>)> {
        let call = extend_call(keys, owner, lease_ms, fence, Named::AllKeys);
        match self.extend_with(&call, replicas, lease_ms).await {
            Err(e) if is_transient(&e) => self.extend_with(&call, replicas, lease_ms).await,
            Err(e) if is_try_again(&e) => {
                let alone = extend_call(keys, owner, lease_ms, fence, Named::LockAlone);
                self.extend_with(&alone, replicas, lease_ms).await
            }
            other => other,
        }
    }

    async fn extend_with(
        &self,
        call: &Call<'_>,
        replicas: Option<u32>,
        lease_ms: u64,
    ) -> RedisResult<(i64, Option<u32>)> {
        match replicas {
            None => self.call::<i64>(call).await.map(|v| (v, None)),
            Some(k) => self
                .call_synced::<i64>(call, k, lease_ms)
                .await
                .map(|(v, acked)| (v, Some(acked))),
        }
    }

    /// `many/inspect.lua`.
    pub(crate) async fn inspect_many_holder(&self, keys: &Keys) -> RedisResult<ManyHolderState> {
        let call = many::INSPECT.call(&many_holder_keys(keys));
        let reply: Vec<Value> = match self.call(&call).await {
            Err(e) if is_transient(&e) => self.call(&call).await?,
            other => other?,
        };
        ManyHolderState::from_reply(&reply).ok_or_else(|| {
            redis::RedisError::from((
                redis::ErrorKind::Parse,
                "unexpected script reply",
                format!("inspect: {reply:?}"),
            ))
        })
    }

    /// `inspect.lua`.
    pub(crate) async fn inspect(&self, keys: &Keys) -> RedisResult<LockState> {
        let call = INSPECT
            .call(&[
                &keys.lock,
                &keys.fence,
                &keys.queue,
                &keys.legacy_fence,
                &keys.leases,
            ])
            .arg(LINE_SHOWN);
        let reply: InspectReply = match self.call(&call).await {
            Err(e) if is_transient(&e) => self.call(&call).await?,
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
        batch: &[(&Keys, &str, u64, u64)],
        deadline: tokio::time::Instant,
    ) -> Vec<Option<i64>> {
        let Ok(Ok(mut conn)) = tokio::time::timeout_at(deadline, self.conn()).await else {
            return vec![None; batch.len()];
        };
        if let Conn::Cluster(_) = conn {
            let each = batch
                .iter()
                .map(|&(keys, owner, lease_ms, fence)| async move {
                    let sent = self.renew_in_cluster(keys, owner, lease_ms, fence);
                    match tokio::time::timeout_at(deadline, sent).await {
                        Ok(r) => r.ok(),
                        Err(_) => {
                            // No answer within the lease: as good as a failed
                            // connection, so the next try makes a new one.
                            self.failed(&redis::RedisError::from(std::io::Error::from(
                                std::io::ErrorKind::TimedOut,
                            )));
                            None
                        }
                    }
                });
            return futures_util::future::join_all(each).await;
        }
        let calls: Vec<Call> = batch
            .iter()
            .map(|&(keys, owner, lease_ms, fence)| {
                extend_call(keys, owner, lease_ms, renewed(keys, fence), Named::AllKeys)
            })
            .collect();
        let pipe = || {
            let mut pipe = redis::pipe();
            for call in &calls {
                pipe.add_command(call.cmd(false));
            }
            pipe
        };
        let run = async {
            match pipe().query_async(&mut conn).await {
                // Teach the server the scripts with one EVAL each (extending
                // is idempotent), then the whole pipeline again.
                Err(e) if is_noscript(&e) => {
                    calls[0].cmd(true).query_async::<i64>(&mut conn).await?;
                    if let Some(other) = calls.iter().find(|c| !c.same_script(&calls[0])) {
                        other.cmd(true).query_async::<i64>(&mut conn).await?;
                    }
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
                tracing::debug!(target: "rlock", error = %e, n = batch.len(), node = %self.label, "renewal failed");
                vec![None; batch.len()]
            }
        }
    }

    /// One renewal on a Cluster: again naming the lock alone when a slot
    /// migration splits its keys (see [`Named::LockAlone`]).
    async fn renew_in_cluster(
        &self,
        keys: &Keys,
        owner: &str,
        lease_ms: u64,
        fence: u64,
    ) -> RedisResult<i64> {
        let fence = renewed(keys, fence);
        let call = extend_call(keys, owner, lease_ms, fence, Named::AllKeys);
        match self.call::<i64>(&call).await {
            Err(e) if is_try_again(&e) => {
                let alone = extend_call(keys, owner, lease_ms, fence, Named::LockAlone);
                self.call::<i64>(&alone).await
            }
            other => other,
        }
    }
}

/// The keys of a read-write lock's or semaphore's scripts, in their order.
fn many_holder_keys(keys: &Keys) -> [&str; 5] {
    [
        &keys.lock,
        &keys.until,
        &keys.fence,
        &keys.queue,
        &keys.leases,
    ]
}

/// Which keys a mutex's extension names.
#[derive(Clone, Copy)]
enum Named {
    /// The lock and its forced-release marks, so that a holding an operator
    /// ended is told `forced` even once its lock is gone.
    AllKeys,
    /// The lock alone. While a Cluster slot migrates, a script naming a key
    /// that exists beside one that does not (the marks almost never do) is
    /// refused with TRYAGAIN, where the lock key alone is served; a renewal
    /// must not fail for the whole move. A holding ended by force is then
    /// still told `forced` while its lock was handed on (the lock's
    /// `previous` names it), else `expired`.
    LockAlone,
}

/// An extension of `owner`'s holding, the one `fence` names (0: whichever it
/// holds), by `lease_ms`.
fn extend_call<'a>(
    keys: &'a Keys,
    owner: &str,
    lease_ms: u64,
    fence: u64,
    named: Named,
) -> Call<'a> {
    match (keys.family.is_many_holder(), named) {
        (true, _) => many::EXTEND.call(&[&keys.lock, &keys.until]),
        (false, Named::AllKeys) => EXTEND.call(&[&keys.lock, &keys.forced]),
        (false, Named::LockAlone) => EXTEND.call(&[&keys.lock]),
    }
    .arg(owner)
    .arg(lease_ms)
    .arg(fence)
}

/// The token a renewal names: a read-write lock's or semaphore's share is
/// renewed by owner alone, as before (only a mutex holding can be ended by
/// force).
fn renewed(keys: &Keys, fence: u64) -> u64 {
    if keys.family.is_many_holder() {
        0
    } else {
        fence
    }
}

/// A Cluster's refusal of a script whose keys are split by a slot migration.
fn is_try_again(e: &redis::RedisError) -> bool {
    e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::TryAgain)
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
