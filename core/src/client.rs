//! The `Client` handle: how it connects, connecting to Redis (one server, a
//! Sentinel group, a Cluster, or Redlock over several masters) and starting
//! the renewal loop, making locks, and closing: the one place that decides
//! what `close()` means for every face. (The handle is declared in
//! `context.rs`, beside the context all its clones share.)

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{self, Poll};
use std::time::Duration;

use futures_util::FutureExt;

use crate::cache::{Cache, CacheOptions};
use crate::context::{Client, Context};
use crate::error::{Error, Result};
use crate::holdings::HeldAtClose;
use crate::keys::CacheKeys;
use crate::kind::Kind;
use crate::lock::Lock;
use crate::options::{self, LockOptions};
use crate::redis::deployment::Deployment;
use crate::redis::endpoint::{manager_config, Endpoint, Member, ReleaseOf};
use crate::rwlock::RwLock;
use crate::semaphore::Semaphore;
use crate::telemetry::{metrics::Stats, Event, Telemetry};
use crate::url::{certificates, Target};
use crate::watchdog;

/// The URL used when none is given and `REDIS_URL` is unset.
pub const DEFAULT_URL: &str = "redis://127.0.0.1:6379";
/// The key prefix used when none is given.
pub const DEFAULT_PREFIX: &str = "rlock";

/// How a [`Client`] connects.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Prefix of every key (`P` in `P:{NAME}`).
    pub prefix: String,
    /// The URLs are seeds of one Redis Cluster (instead of independent
    /// masters for Redlock when there are several).
    pub cluster: bool,
    /// Bound on establishing a TCP/TLS connection.
    pub connect_timeout: Duration,
    /// Bound on one command's reply; a stalled Redis fails over to the
    /// reconnect path instead of hanging a lock operation.
    pub response_timeout: Duration,
    /// Redlock: bound on one node's reply, so a slow node never stalls a
    /// quorum that the others decide.
    pub node_timeout: Duration,
    /// For `rediss://`: the CA certificate (PEM) to trust instead of the
    /// public web roots, for servers with a private CA.
    pub tls_ca_pem: Option<Vec<u8>>,
    /// Which package and runtime the client comes from (`python 3.11.4`),
    /// written in its registration for inspection to show.
    pub face: String,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            prefix: DEFAULT_PREFIX.to_owned(),
            cluster: false,
            connect_timeout: Duration::from_secs(2),
            response_timeout: Duration::from_secs(2),
            node_timeout: Duration::from_millis(200),
            tls_ca_pem: None,
            face: "rust".to_owned(),
        }
    }
}

impl ClientOptions {
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    pub fn cluster(mut self, on: bool) -> Self {
        self.cluster = on;
        self
    }

    pub fn node_timeout(mut self, timeout: Duration) -> Self {
        self.node_timeout = timeout;
        self
    }

    pub fn face(mut self, face: impl Into<String>) -> Self {
        self.face = face.into();
        self
    }

    pub fn tls_ca_pem(mut self, pem: Option<Vec<u8>>) -> Self {
        self.tls_ca_pem = pem;
        self
    }
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("server", &self.context.display)
            .field("prefix", &self.context.prefix)
            .finish()
    }
}

impl Client {
    /// Connects with default options. `url` is `redis://`, `rediss://` (TLS),
    /// with optional `user:password@` and `/db`, or
    /// `redis+sentinel://[user:pass@]host:port[,host:port…]/service[/db]`.
    pub async fn connect(url: &str) -> Result<Self> {
        Self::connect_with(url, ClientOptions::default()).await
    }

    /// Connects to one URL with the given options.
    pub async fn connect_with(url: &str, options: ClientOptions) -> Result<Self> {
        Self::connect_urls(&[url], options).await
    }

    /// Connects to several URLs: the seeds of one Cluster with
    /// `options.cluster`, otherwise independent masters locked by majority
    /// (Redlock). Every argument is checked before any I/O.
    pub async fn connect_urls<S: AsRef<str>>(urls: &[S], options: ClientOptions) -> Result<Self> {
        let targets = checked_targets(urls, &options)?;
        let secrets: Vec<String> = targets.iter().flat_map(|t| t.secrets.clone()).collect();
        let display = targets
            .iter()
            .map(|t| t.display.as_str())
            .collect::<Vec<_>>()
            .join(",");
        let failures = Failures(&secrets);
        let telemetry = Arc::new(Telemetry::default());
        let members = if options.cluster {
            vec![connect_cluster(&targets, &options, &failures, &telemetry).await?]
        } else {
            connect_masters(&targets, &options, &failures, &telemetry).await?
        };
        let deployment = Arc::new(Deployment::new(members, secrets, options.node_timeout));
        let context = Context::new(
            options.prefix,
            display,
            options.connect_timeout,
            deployment.clone(),
            telemetry.clone(),
            &options.face,
        );
        // Before the first lock: inspection names this client from then on.
        context
            .registration
            .renew(&deployment, &context.telemetry)
            .await;
        context.runtime().spawn(watchdog::run(
            context.holdings.clone(),
            context.registration.clone(),
            deployment,
            context.shutdown_signal(),
        ));
        tracing::debug!(target: "rlock", server = %context.display, "connected");
        Ok(Client { context })
    }

    /// The URL from `REDIS_URL`, else [`DEFAULT_URL`].
    pub fn default_url() -> String {
        std::env::var("REDIS_URL")
            .ok()
            .filter(|u| !u.is_empty())
            .unwrap_or_else(|| DEFAULT_URL.to_owned())
    }

    /// A lock with default options (30 s lease, auto-renew), owned by a new
    /// handle: another `lock()` of the same name is another owner.
    pub fn lock(&self, name: &str) -> Result<Lock> {
        self.lock_with(name, LockOptions::default())
    }

    /// A lock with the given options, owned by a new handle.
    pub fn lock_with(&self, name: &str, options: LockOptions) -> Result<Lock> {
        self.lock_kind(name, options, Kind::Mutex)
    }

    /// A lock owned by a caller-chosen unit (a thread, a task): the bindings use
    /// this so that the same unit re-acquiring the same name nests.
    pub fn lock_as(&self, name: &str, options: LockOptions, unit: &str) -> Result<Lock> {
        Lock::new(self.clone(), name, options, unit, Kind::Mutex)
    }

    /// A read-write lock, owned by a new handle (its two sides are one owner).
    pub fn rw_lock(&self, name: &str, options: LockOptions) -> Result<RwLock> {
        RwLock::new(self.lock_kind(name, options, Kind::Write)?)
    }

    /// A semaphore of `permits` permits, owned by a new handle; each
    /// acquisition takes one unless told otherwise ([`Semaphore::acquire`]).
    pub fn semaphore(&self, name: &str, permits: i64, options: LockOptions) -> Result<Semaphore> {
        Semaphore::new(self.lock_kind(name, options, Kind::permits(permits, 1)?)?)
    }

    /// The cache entry `key`, read and rebuilt as `options` say (see
    /// [`Cache`]); checked before any I/O.
    pub fn cache(&self, key: &str, options: CacheOptions) -> Result<Cache> {
        Cache::new(self.clone(), key, options)
    }

    /// The value of the cache entry `key`, from the cache or from `loader`,
    /// which one caller across every process runs on a miss (see
    /// [`Cache::get`]).
    pub async fn cached<F, Fut, E>(
        &self,
        key: &str,
        options: CacheOptions,
        loader: F,
    ) -> Result<Option<Vec<u8>>>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = std::result::Result<Option<Vec<u8>>, E>> + Send + 'static,
        E: std::fmt::Display,
    {
        self.cache(key, options)?.get(loader).await
    }

    /// Deletes the cache entry `key`, so the next read rebuilds it; a
    /// rebuild running meanwhile (which may have read older data) never
    /// writes its value after this. Whether there was an entry (false
    /// too when this request deleted it and its reply was lost: the resend
    /// finds nothing).
    pub async fn invalidate(&self, key: &str) -> Result<bool> {
        crate::cache::invalidate(self, key).await
    }

    fn lock_kind(&self, name: &str, options: LockOptions, kind: Kind) -> Result<Lock> {
        let handle = self.context.next_handle.fetch_add(1, Ordering::Relaxed);
        Lock::new(self.clone(), name, options, &format!("h{handle}"), kind)
    }

    /// The random id of this client (the first half of its owner ids).
    pub fn id(&self) -> &str {
        &self.context.id
    }

    pub fn prefix(&self) -> &str {
        &self.context.prefix
    }

    /// The servers as text, without any password.
    pub fn server(&self) -> &str {
        &self.context.display
    }

    /// What this client counted since it connected.
    pub fn stats(&self) -> Stats {
        self.context.telemetry.metrics.snapshot()
    }

    /// The events of this client from now on: leases lost, renewals that
    /// failed, reconnects and background errors (each also a `tracing`
    /// event). A listener more than 1,024 events behind misses the oldest.
    pub fn events(&self) -> tokio::sync::broadcast::Receiver<Event> {
        self.context.telemetry.subscribe()
    }

    /// Whether locks take a majority of several independent masters.
    pub fn is_redlock(&self) -> bool {
        self.context.deployment.is_redlock()
    }

    /// Closes the client: from this call on, every operation of the client
    /// and of its locks fails with [`Error::Closed`], and every lock still
    /// held counts as lost ([`LostReason::Closed`](crate::LostReason::Closed),
    /// its holder told at once). The renewal loop and the pub/sub feeds stop,
    /// waits in progress end with `Error::Closed`, and each held lock is
    /// released (every re-entry of it), best effort: one that Redis does not
    /// release within 2 s expires with its lease. The connections close once
    /// those releases are answered.
    ///
    /// Everything but the releases happens before this returns; the returned
    /// future resolves when they are done (dropping it lets them finish in the
    /// background). Closing again does nothing more.
    pub fn close(&self) -> Closing {
        let context = &self.context;
        let mut done = context.closed.subscribe();
        if let Some(deployment) = context.deployment.close() {
            let held = context.holdings.close();
            context.shutdown.send_replace(true);
            // Sleeping waiters attempt again, and hear that the client is closed.
            context.waiters.wake_all_channels();
            let closed = context.closed.clone();
            let registration = context.registration.clone();
            context.runtime().spawn(async move {
                let releases = held.iter().map(|given| give_back(&deployment, given));
                let all = futures_util::future::join_all(releases)
                    .then(|_| async { registration.remove(&deployment).await });
                if tokio::time::timeout(CLOSE_RELEASES_WITHIN, all)
                    .await
                    .is_err()
                {
                    tracing::debug!(target: "rlock", "close: Redis did not answer every release; those leases run out"
                    );
                }
                // The last handle on the connections but for requests still in
                // flight, which end with their reply.
                drop(deployment);
                closed.send_replace(true);
            });
        }
        Closing(Box::pin(async move {
            // Err: the client is gone, and its releases went with the runtime.
            let _ = done.wait_for(|done| *done).await;
        }))
    }

    /// Resolves once every clean-up this client runs in the background for
    /// an abandoned wait is done: leaving a line, passing on a grant handed
    /// to it, giving back what an attempt still in flight acquired, ending a
    /// cache rebuild whose caller left. A process that stops waiting and
    /// exits at once (`rlock exec` on a signal) awaits this first, bounded
    /// (Redis may not answer), so that it leaves no place in line behind.
    pub async fn settled(&self) {
        self.context.waiters.settled().await
    }

    /// Whether [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        self.context.deployment.current().is_err()
    }
}

/// How long `close()` waits for Redis to answer its releases: a process that
/// shuts down must not hang on an unreachable server, and a lease that is not
/// released runs out in Redis anyway.
pub(crate) const CLOSE_RELEASES_WITHIN: Duration = Duration::from_secs(2);

/// Releases every re-entry of one holding on a closing client.
async fn give_back(deployment: &Deployment, given: &HeldAtClose) {
    if let Some(entry) = CacheKeys::of_rebuild(&given.keys) {
        // The callers waiting for a rebuild listen on its entry's channel,
        // not the lock's: end it as an abandoned rebuild ends
        // (`cached/fail.lua`), so they wake and one of them rebuilds rather
        // than sleeping out its lease. Unanswered, a plain release tries
        // again, as the rebuild's own end does.
        if deployment
            .cache_fail(&entry, &given.owner, given.fence, "", 0)
            .await
            .is_ok()
        {
            return;
        }
    }
    let lease_ms = given.lease.as_millis() as u64;
    for left in (1..=given.count).rev() {
        let of = ReleaseOf {
            before: i64::from(left),
            fence: given.fence,
            ..ReleaseOf::ANY
        };
        match deployment
            .release(&given.keys, &given.owner, lease_ms, of)
            .await
        {
            Ok(Ok(0)) => return,
            Ok(Ok(_)) => {}
            // Not this owner's any more (or Redis failed): nothing to give back.
            Ok(Err(_)) | Err(_) => return,
        }
    }
}

/// The future of a [`Client::close`]: resolves once the client's locks are
/// given back (or the wait for Redis to answer ran out).
pub struct Closing(Pin<Box<dyn Future<Output = ()> + Send>>);

impl Future for Closing {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut task::Context<'_>) -> Poll<()> {
        self.0.as_mut().poll(cx)
    }
}

impl fmt::Debug for Closing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Closing")
    }
}

/// The URLs and options of a connection, checked before any I/O.
fn checked_targets<S: AsRef<str>>(urls: &[S], options: &ClientOptions) -> Result<Vec<Target>> {
    options::prefix(&options.prefix)?;
    let targets = urls
        .iter()
        .map(|u| Target::parse(u.as_ref()))
        .collect::<Result<Vec<_>>>()?;
    if targets.is_empty() {
        return Err(Error::invalid("at least one Redis URL is needed"));
    }
    if targets.len() > 1 && targets.iter().any(|t| t.sentinel) {
        return Err(Error::invalid(
            "a redis+sentinel:// URL names a whole deployment; give it alone",
        ));
    }
    if options.cluster && targets.iter().any(|t| t.sentinel) {
        return Err(Error::invalid(
            "cluster mode takes redis:// seed URLs, not Sentinel",
        ));
    }
    Ok(targets)
}

/// What failed, named by the server it failed at, never with a password.
struct Failures<'a>(&'a [String]);

impl Failures<'_> {
    fn text(&self, e: &redis::RedisError, server: &str) -> String {
        let mut text = e.to_string();
        for s in self.0.iter().filter(|s| !s.is_empty()) {
            text = text.replace(s.as_str(), "***");
        }
        format!("{server}: {text}")
    }

    fn connection(&self, (e, server): (redis::RedisError, String)) -> Error {
        Error::Connection(self.text(&e, &server))
    }
}

/// One member standing for a whole Redis Cluster, reached through its seeds.
async fn connect_cluster(
    targets: &[Target],
    options: &ClientOptions,
    failures: &Failures<'_>,
    telemetry: &Arc<Telemetry>,
) -> Result<Member> {
    let build = |protocol| {
        let mut builder =
            redis::cluster::ClusterClientBuilder::new(targets.iter().map(|t| t.url.as_str()))
                .use_protocol(protocol)
                .connection_timeout(options.connect_timeout)
                .response_timeout(options.response_timeout)
                // redis-rs retries a request 16 times with waits growing to
                // minutes; a lock operation must fail (and be retried by its
                // caller) within seconds instead.
                .retries(3)
                .min_retry_wait(10)
                .max_retry_wait(500);
        if let Some(pem) = &options.tls_ca_pem {
            builder = builder.certs(certificates(pem));
        }
        builder
            .build()
            .map_err(|e| Error::invalid(format!("bad cluster seeds: {e}")))
    };
    // Commands over RESP2; sharded pub/sub needs RESP3 push messages.
    let cluster = Endpoint::Cluster {
        commands: Box::new(build(redis::ProtocolVersion::RESP2)?),
        feed: Box::new(build(redis::ProtocolVersion::RESP3)?),
    };
    let seeds = targets
        .iter()
        .map(|t| t.address.as_str())
        .collect::<Vec<_>>()
        .join(",");
    let config = manager_config(options.connect_timeout, options.response_timeout);
    let label = format!("Cluster {seeds}");
    let member = Member::connect(cluster, label, config, false, telemetry.clone())
        .await
        .map_err(|f| failures.connection(f))?;
    // Without sharded pub/sub (Redis 6.2) a Cluster takes locks but loses
    // every release at its SPUBLISH and deafens its waiters: refused here,
    // before any lock is taken on it.
    match member.sharded_pubsub().await {
        Ok(true) => Ok(member),
        Ok(false) => Err(Error::invalid(format!(
            "Redis Cluster {seeds} has no sharded pub/sub, which its locks need: use Redis 7.0 or later (or Valkey)"
        ))),
        Err(e) => Err(failures.connection((e, member.server()))),
    }
}

/// One server (or the master a Sentinel names), or the masters of a Redlock,
/// a majority of which must answer.
async fn connect_masters(
    targets: &[Target],
    options: &ClientOptions,
    failures: &Failures<'_>,
    telemetry: &Arc<Telemetry>,
) -> Result<Vec<Member>> {
    let redlock = targets.len() > 1;
    let config = manager_config(options.connect_timeout, options.response_timeout);
    // A Redlock master that is down must fail its requests at once: the
    // quorum does without it, while a request waiting out reconnection
    // back-offs would hold every decision (and the grants of a split vote)
    // for the whole node timeout.
    let config = if redlock {
        config.set_number_of_retries(0)
    } else {
        config
    };
    let mut members = Vec::with_capacity(targets.len());
    for t in targets {
        let endpoint = t.endpoint(options.tls_ca_pem.as_deref())?;
        members.push(
            Member::connect(
                endpoint,
                t.address.clone(),
                config.clone(),
                redlock,
                telemetry.clone(),
            )
            .await
            .map_err(|f| failures.connection(f))?,
        );
    }
    if redlock {
        // A minority of masters may be down; a majority must answer.
        let answers = futures_util::future::join_all(members.iter().map(|n| async move {
            tokio::time::timeout(options.connect_timeout, n.ping())
                .await
                .map_err(|_| format!("{}: no answer", n.server()))
                .and_then(|r| r.map_err(|e| failures.text(&e, &n.server())))
        }))
        .await;
        let down: Vec<String> = answers.into_iter().filter_map(Result::err).collect();
        if members.len() - down.len() < members.len() / 2 + 1 {
            return Err(Error::Connection(format!(
                "fewer than a majority of the {} masters answer: {}",
                members.len(),
                down.join("; ")
            )));
        }
    }
    Ok(members)
}
