//! Connecting to Redis: configuration, the reconnecting command connection, the
//! shared pub/sub connection (started on the first wait), and the renewal loop.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use tokio::sync::watch;

use crate::error::{Error, Result};
use crate::lock::{Lock, LockOptions};
use crate::validate;
use crate::wait::{self, Ticket, Waiters};
use crate::watchdog::{self, Holdings};

/// The URL used when none is given and `REDIS_URL` is unset.
pub const DEFAULT_URL: &str = "redis://127.0.0.1:6379";
/// The key prefix used when none is given.
pub const DEFAULT_PREFIX: &str = "rlock";

/// How a [`Client`] connects.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Prefix of every key (`P` in `P:{NAME}`).
    pub prefix: String,
    /// Bound on establishing a TCP/TLS connection.
    pub connect_timeout: Duration,
    /// Bound on one command's reply; a stalled Redis fails over to the
    /// reconnect path instead of hanging a lock operation.
    pub response_timeout: Duration,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            prefix: DEFAULT_PREFIX.to_owned(),
            connect_timeout: Duration::from_secs(2),
            response_timeout: Duration::from_secs(2),
        }
    }
}

impl ClientOptions {
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
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
    redis: redis::Client,
    pub(crate) conn: ConnectionManager,
    pub(crate) prefix: String,
    /// Random per client (uuid v4 from the OS CSPRNG): the first half of every
    /// owner id, so owners of different clients never collide.
    pub(crate) id: String,
    /// Text shown for the server, without credentials.
    display: String,
    secrets: Vec<String>,
    connect_timeout: Duration,
    runtime: tokio::runtime::Handle,
    pub(crate) holdings: Arc<Holdings>,
    pub(crate) waiters: Arc<Waiters>,
    next_handle: AtomicU64,
    shutdown: watch::Sender<bool>,
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
    /// with optional `user:password@` and `/db`.
    pub async fn connect(url: &str) -> Result<Self> {
        Self::connect_with(url, ClientOptions::default()).await
    }

    /// Connects with the given options; every argument is checked before any I/O.
    pub async fn connect_with(url: &str, options: ClientOptions) -> Result<Self> {
        validate::prefix(&options.prefix)?;
        let target = Target::parse(url)?;
        let redis = target.client()?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(options.connect_timeout))
            .set_response_timeout(Some(options.response_timeout))
            .set_number_of_retries(2)
            .set_min_delay(Duration::from_millis(50))
            .set_max_delay(Duration::from_millis(500));
        let conn = ConnectionManager::new_with_config(redis.clone(), config)
            .await
            .map_err(|e| connection_error(&e, &target.secrets))?;
        let (shutdown, _) = watch::channel(false);
        let inner = Arc::new(Inner {
            redis,
            conn: conn.clone(),
            prefix: options.prefix,
            id: uuid::Uuid::new_v4().to_string(),
            display: target.display,
            secrets: target.secrets,
            connect_timeout: options.connect_timeout,
            runtime: tokio::runtime::Handle::current(),
            holdings: Arc::new(Holdings::default()),
            waiters: Waiters::new(),
            next_handle: AtomicU64::new(1),
            shutdown,
        });
        inner.runtime.spawn(watchdog::run(
            inner.holdings.clone(),
            conn,
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

    /// The server as text, without any password.
    pub fn server(&self) -> &str {
        &self.inner.display
    }

    /// Stops the renewal loop and the pub/sub connection. Locks still held are
    /// not released: they expire with their lease.
    pub fn close(&self) {
        self.inner.shutdown.send_replace(true);
    }
}

impl Inner {
    /// Maps a Redis error to the core's connection category, without secrets.
    pub(crate) fn error(&self, e: &redis::RedisError) -> Error {
        connection_error(e, &self.secrets)
    }

    /// Joins the release channel of a lock, starting the shared pub/sub
    /// connection on first use.
    pub(crate) async fn join(&self, channel: &str) -> Ticket {
        self.waiters
            .join(channel, |rx| {
                self.runtime.spawn(wait::run_pubsub(
                    self.redis.clone(),
                    Arc::downgrade(&self.waiters),
                    rx,
                    Shutdown(self.shutdown.subscribe()),
                    self.connect_timeout,
                ));
            })
            .await
    }

    pub(crate) fn runtime(&self) -> &tokio::runtime::Handle {
        &self.runtime
    }
}

/// Whether an error may mean the connection dropped under the request, so
/// one retry on the reconnected connection is worth it.
pub(crate) fn is_transient(e: &redis::RedisError) -> bool {
    e.is_io_error() || e.is_connection_dropped() || e.is_unrecoverable_error()
}

fn connection_error(e: &redis::RedisError, secrets: &[String]) -> Error {
    let mut text = e.to_string();
    for s in secrets.iter().filter(|s| !s.is_empty()) {
        text = text.replace(s.as_str(), "***");
    }
    Error::Connection(text)
}

/// Checks a server URL without connecting; returns it as it may be shown.
pub(crate) fn checked_url(raw: &str) -> Result<String> {
    let target = Target::parse(raw)?;
    target.client()?;
    Ok(target.display)
}

/// A parsed, checked server URL.
struct Target {
    url: String,
    display: String,
    secrets: Vec<String>,
}

impl Target {
    fn parse(raw: &str) -> Result<Self> {
        // Errors here never echo the URL: it may carry a password.
        let url = url::Url::parse(raw)
            .map_err(|e| Error::invalid(format!("malformed Redis URL ({e})")))?;
        match url.scheme() {
            "redis" | "rediss" => {}
            other => {
                return Err(Error::invalid(format!(
                    "unsupported URL scheme {other:?} (expected redis:// or rediss://)"
                )))
            }
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err(Error::invalid("Redis URL has no host"));
        }
        let path = url.path().trim_start_matches('/');
        if !path.is_empty() && path.parse::<u16>().is_err() {
            return Err(Error::invalid(
                "Redis URL path must be a database number (like /0)",
            ));
        }
        let mut secrets = Vec::new();
        if let Some(p) = url.password() {
            secrets.push(p.to_owned());
            if let Ok(decoded) = percent_encoding::percent_decode_str(p).decode_utf8() {
                secrets.push(decoded.into_owned());
            }
        }
        let mut shown = url.clone();
        if url.password().is_some() {
            let _ = shown.set_password(Some("***"));
        }
        Ok(Target {
            url: raw.to_owned(),
            display: shown.to_string(),
            secrets,
        })
    }

    fn client(&self) -> Result<redis::Client> {
        if self.url.starts_with("rediss:") {
            crate::tls::install_provider();
        }
        redis::Client::open(self.url.as_str())
            .map_err(|e| connection_error(&e, &self.secrets))
            .map_err(|e| match e {
                Error::Connection(m) => Error::invalid(format!("bad Redis URL: {m}")),
                other => other,
            })
    }
}
