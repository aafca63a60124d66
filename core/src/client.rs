//! Connecting to Redis: configuration, the deployment (one server, a Sentinel
//! group, a Cluster, or Redlock over several masters), the release-message
//! feeds (started on the first wait), the renewal loop, and closing: the one
//! place that decides what `close()` means for every face.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Once, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::sync::watch;

use crate::error::{Error, NotOwnedReason, Result};
use crate::holdings::{Given, Holdings};
use crate::keys::Keys;
use crate::lock::Lock;
use crate::options::{self, LockOptions};
use crate::redis::deployment::{Attempt, Deployment};
use crate::redis::endpoint::{manager_config, AcquireRequest, Endpoint, Node, ReleaseOf};
use crate::redis::scripts::LockState;
use crate::turns::Turns;
use crate::url::{certificates, Target};
use crate::wakeups::registry::{Ticket, Waiters};
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

    pub fn tls_ca_pem(mut self, pem: Option<Vec<u8>>) -> Self {
        self.tls_ca_pem = pem;
        self
    }
}

/// A connection to one Redis deployment, shared by every lock made from it.
/// Cheap to clone; all clones share the connections, the holdings table and
/// the renewal loop, which stop when the last clone is dropped.
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) deployment: Connections,
    pub(crate) prefix: String,
    /// Random per client (uuid v4 from the OS CSPRNG): the first half of every
    /// owner id, so owners of different clients never collide.
    pub(crate) id: String,
    /// The servers as text, without credentials.
    display: String,
    connect_timeout: Duration,
    runtime: tokio::runtime::Handle,
    pub(crate) holdings: Arc<Holdings>,
    pub(crate) waiters: Arc<Waiters>,
    /// One request at a time per owner and lock (see `turns.rs`).
    pub(crate) turns: Turns,
    feeds_started: Once,
    next_handle: AtomicU64,
    shutdown: watch::Sender<bool>,
    /// Turns true once a `close()` has given back what was held.
    closed: Arc<watch::Sender<bool>>,
}

/// Resolves once the client is closed or dropped: background tasks stop then.
pub(crate) struct Shutdown(watch::Receiver<bool>);

impl Shutdown {
    pub(crate) async fn signalled(&mut self) {
        // Err: the client is gone, which is a shutdown too.
        let _ = self.0.wait_for(|closed| *closed).await;
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.shutdown.send_replace(true);
    }
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("server", &self.inner.display)
            .field("prefix", &self.inner.prefix)
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
        let secrets: Vec<String> = targets.iter().flat_map(|t| t.secrets.clone()).collect();
        let display = targets
            .iter()
            .map(|t| t.display.as_str())
            .collect::<Vec<_>>()
            .join(",");
        let config = manager_config(options.connect_timeout, options.response_timeout);
        let scrub = |e: redis::RedisError| {
            let mut text = e.to_string();
            for s in secrets.iter().filter(|s| !s.is_empty()) {
                text = text.replace(s.as_str(), "***");
            }
            Error::Connection(text)
        };
        let nodes = if options.cluster {
            if targets.iter().any(|t| t.sentinel) {
                return Err(Error::invalid(
                    "cluster mode takes redis:// seed URLs, not Sentinel",
                ));
            }
            let build = |protocol| {
                let mut builder = redis::cluster::ClusterClientBuilder::new(
                    targets.iter().map(|t| t.url.as_str()),
                )
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
            vec![Node::connect(cluster, display.clone(), config, false)
                .await
                .map_err(scrub)?]
        } else {
            let redlock = targets.len() > 1;
            // A Redlock master that is down must fail its requests at once:
            // the quorum does without it, while a request waiting out
            // reconnection back-offs would hold every decision (and the
            // grants of a split vote) for the whole node timeout.
            let config = if redlock {
                config.set_number_of_retries(0)
            } else {
                config
            };
            let mut nodes = Vec::with_capacity(targets.len());
            for t in &targets {
                let endpoint = t.endpoint(options.tls_ca_pem.as_deref())?;
                nodes.push(
                    Node::connect(endpoint, t.display.clone(), config.clone(), redlock)
                        .await
                        .map_err(scrub)?,
                );
            }
            if redlock {
                // A minority of masters may be down; a majority must answer.
                let answers = futures_util::future::join_all(nodes.iter().map(|n| async move {
                    tokio::time::timeout(options.connect_timeout, n.ping())
                        .await
                        .map_err(|_| format!("{}: no answer", n.label))
                        .and_then(|r| r.map_err(|e| format!("{}: {}", n.label, scrub(e))))
                }))
                .await;
                let down: Vec<String> = answers.into_iter().filter_map(Result::err).collect();
                if nodes.len() - down.len() < nodes.len() / 2 + 1 {
                    return Err(Error::Connection(format!(
                        "fewer than a majority of the {} masters answer: {}",
                        nodes.len(),
                        down.join("; ")
                    )));
                }
            }
            nodes
        };
        let deployment = Arc::new(Deployment::new(nodes, secrets, options.node_timeout));
        let (shutdown, _) = watch::channel(false);
        let redlock = deployment.is_redlock();
        let inner = Arc::new(Inner {
            prefix: options.prefix,
            id: uuid::Uuid::new_v4().to_string(),
            display,
            connect_timeout: options.connect_timeout,
            runtime: tokio::runtime::Handle::current(),
            holdings: Arc::new(Holdings::default()),
            waiters: Waiters::new(tokio::runtime::Handle::current()),
            turns: Turns::default(),
            feeds_started: Once::new(),
            next_handle: AtomicU64::new(1),
            shutdown,
            closed: Arc::new(watch::channel(false).0),
            deployment: Connections {
                open: Mutex::new(Some(deployment.clone())),
                redlock,
            },
        });
        inner.runtime.spawn(watchdog::run(
            inner.holdings.clone(),
            deployment,
            Shutdown(inner.shutdown.subscribe()),
        ));
        tracing::debug!(server = %inner.display, "connected");
        Ok(Client { inner })
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
        let handle = self.inner.next_handle.fetch_add(1, Ordering::Relaxed);
        Lock::new(self.clone(), name, options, &format!("h{handle}"))
    }

    /// A lock owned by a caller-chosen unit (a thread, a task): the bindings use
    /// this so that the same unit re-acquiring the same name nests.
    pub fn lock_as(&self, name: &str, options: LockOptions, unit: &str) -> Result<Lock> {
        Lock::new(self.clone(), name, options, unit)
    }

    /// The random id of this client (the first half of its owner ids).
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    pub fn prefix(&self) -> &str {
        &self.inner.prefix
    }

    /// The servers as text, without any password.
    pub fn server(&self) -> &str {
        &self.inner.display
    }

    /// Whether locks take a majority of several independent masters.
    pub fn is_redlock(&self) -> bool {
        self.inner.deployment.is_redlock()
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
        let inner = &self.inner;
        let mut done = inner.closed.subscribe();
        if let Some(deployment) = inner.deployment.close() {
            let held = inner.holdings.close();
            inner.shutdown.send_replace(true);
            // Sleeping waiters attempt again, and hear that the client is closed.
            inner.waiters.wake_all_channels();
            let closed = inner.closed.clone();
            inner.runtime.spawn(async move {
                let releases = held.iter().map(|given| give_back(&deployment, given));
                let all = futures_util::future::join_all(releases);
                if tokio::time::timeout(CLOSE_RELEASES_WITHIN, all)
                    .await
                    .is_err()
                {
                    tracing::debug!(
                        "close: Redis did not answer every release; those leases run out"
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

    /// Whether [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        self.inner.deployment.current().is_err()
    }
}

/// How long `close()` waits for Redis to answer its releases: a process that
/// shuts down must not hang on an unreachable server, and a lease that is not
/// released runs out in Redis anyway.
pub(crate) const CLOSE_RELEASES_WITHIN: Duration = Duration::from_secs(2);

/// Releases every re-entry of one holding on a closing client.
async fn give_back(deployment: &Deployment, given: &Given) {
    let lease_ms = given.lease.as_millis() as u64;
    for left in (1..=given.count).rev() {
        let of = ReleaseOf {
            before: i64::from(left),
            fence: given.fence,
            last_valid_until: None,
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

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.0.as_mut().poll(cx)
    }
}

impl fmt::Debug for Closing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Closing")
    }
}

/// The client's way to its deployment, open until `close()`: every request of
/// a lock goes through here, so a closed client refuses them all with
/// [`Error::Closed`] before any I/O, and dropping the deployment here (with
/// the background tasks' handles) closes its connections.
pub(crate) struct Connections {
    open: Mutex<Option<Arc<Deployment>>>,
    redlock: bool,
}

impl Connections {
    fn current(&self) -> Result<Arc<Deployment>> {
        let open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        open.clone().ok_or(Error::Closed)
    }

    /// Shuts the way; the deployment to close, the first time only.
    fn close(&self) -> Option<Arc<Deployment>> {
        self.open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    pub(crate) fn is_redlock(&self) -> bool {
        self.redlock
    }

    /// See [`Deployment::drift`]. On a closed client every holding is lost
    /// already, so no lease is timed any more.
    pub(crate) fn drift(&self, lease: Duration) -> Duration {
        self.current().map_or(Duration::ZERO, |d| d.drift(lease))
    }

    /// An acquisition granted while the client closed is given back at once:
    /// nothing would renew or release it.
    pub(crate) fn acquire<'a>(&'a self, req: &'a AcquireRequest<'_>) -> Request<'a, Attempt> {
        Box::pin(async move {
            let deployment = self.current()?;
            let attempt = deployment.acquire(req).await?;
            if self.current().is_err() {
                if let Attempt::Held { .. } = attempt {
                    let lease_ms = req.lease.as_millis() as u64;
                    let _ = deployment
                        .release(req.keys, req.owner, lease_ms, ReleaseOf::ANY)
                        .await;
                }
                return Err(Error::Closed);
            }
            Ok(attempt)
        })
    }

    pub(crate) fn release<'a>(
        &'a self,
        keys: &'a Keys,
        owner: &'a str,
        lease_ms: u64,
        of: ReleaseOf,
    ) -> Request<'a, std::result::Result<u32, NotOwnedReason>> {
        Box::pin(async move {
            let deployment = self.current()?;
            deployment.release(keys, owner, lease_ms, of).await
        })
    }

    pub(crate) fn extend<'a>(
        &'a self,
        keys: &'a Keys,
        owner: &'a str,
        lease_ms: u64,
        replicas: Option<u32>,
        fence: u64,
    ) -> Request<'a, std::result::Result<u32, NotOwnedReason>> {
        Box::pin(async move {
            let deployment = self.current()?;
            deployment
                .extend(keys, owner, lease_ms, replicas, fence)
                .await
        })
    }

    pub(crate) fn dequeue<'a>(
        &'a self,
        keys: &'a Keys,
        owner: &'a str,
    ) -> Request<'a, Option<u64>> {
        Box::pin(async move { self.current()?.dequeue(keys, owner).await })
    }

    pub(crate) fn inspect<'a>(&'a self, keys: &'a Keys) -> Request<'a, LockState> {
        Box::pin(async move { self.current()?.inspect(keys).await })
    }
}

/// A request through [`Connections`]. Boxed as a `dyn Future + Send`, so a
/// caller proves `Send` of its own future without walking the whole exchange
/// with Redis again (spawning a lock operation otherwise overflows the
/// compiler's recursion limit).
pub(crate) type Request<'a, T> = Pin<Box<dyn Future<Output = Result<T>> + Send + 'a>>;

impl Inner {
    /// Whether this client listens on `channel` already (a waiter may
    /// then join the line with its first attempt).
    pub(crate) fn listening(&self, channel: &str) -> bool {
        self.waiters.is_subscribed(channel)
    }

    /// Joins a channel (a lock's release channel, or for a waiter in line its
    /// waiter channel with its owner id), starting the feeds on first use.
    pub(crate) async fn join(
        &self,
        channel: &str,
        fair_owner: Option<&str>,
        deadline: Option<tokio::time::Instant>,
    ) -> Ticket {
        let Ok(deployment) = self.deployment.current() else {
            // Closed: no feed will confirm; the waiter's next attempt fails.
            return self
                .waiters
                .join(channel, fair_owner, Some(tokio::time::Instant::now()))
                .await;
        };
        self.feeds_started.call_once(|| {
            for node in deployment.nodes() {
                let requests = self.waiters.add_feed();
                self.runtime.spawn(crate::wakeups::feed::run(
                    node.feed(),
                    Arc::downgrade(&self.waiters),
                    requests,
                    Shutdown(self.shutdown.subscribe()),
                    self.connect_timeout,
                ));
            }
        });
        self.waiters.join(channel, fair_owner, deadline).await
    }

    pub(crate) fn runtime(&self) -> &tokio::runtime::Handle {
        &self.runtime
    }
}
