//! The shared context of one client, which every part of it uses: the way to
//! its deployment (open until `close()`), what it holds, who of it waits on
//! what (and the pub/sub feeds, started on its first wait), the mutexes that
//! keep each owner's requests one at a time, and the runtime its background tasks run on. Locks reach their
//! client's connections through here, so lock code depends on this context
//! and not on `client.rs`.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, Once, PoisonError};
use std::time::Duration;

use tokio::sync::watch;

use crate::error::{Error, NotOwnedReason, Result};
use crate::holdings::Holdings;
use crate::keys::Keys;
use crate::owner_mutexes::OwnerMutexTable;
use crate::redis::deployment::{Attempt, Deployment};
use crate::redis::endpoint::{AcquireRequest, ReleaseOf};
use crate::redis::scripts::{LockState, ManyHolderState};
use crate::registration::Registration;
use crate::shutdown::Shutdown;
use crate::telemetry::Telemetry;
use crate::wakeups::registry::{Ticket, Waiters};

/// A connection to one Redis deployment, shared by every lock made from it.
/// Cheap to clone; all clones share the connections, the holdings table and
/// the renewal loop, which stop when the last clone is dropped.
// Declared beside the context it shares, so that a lock can keep its client
// (`Lock::client`) while lock code depends on this context alone; connecting,
// making locks and closing are in `client.rs`.
#[derive(Clone)]
pub struct Client {
    pub(crate) context: Arc<Context>,
}

/// What every part of one client shares.
pub(crate) struct Context {
    pub(crate) deployment: Connections,
    pub(crate) prefix: String,
    /// Random per client (uuid v4 from the OS CSPRNG): the first half of every
    /// owner id, so owners of different clients never collide.
    pub(crate) id: String,
    /// The servers as text, without credentials.
    pub(crate) display: String,
    connect_timeout: Duration,
    runtime: tokio::runtime::Handle,
    pub(crate) holdings: Arc<Holdings>,
    /// What it wrote about itself in Redis, for inspection.
    pub(crate) registration: Arc<Registration>,
    /// Its counters and events.
    pub(crate) telemetry: Arc<Telemetry>,
    pub(crate) waiters: Arc<Waiters>,
    /// One request at a time per owner and lock (see `owner_mutexes.rs`).
    pub(crate) owner_mutexes: OwnerMutexTable,
    feeds_started: Once,
    pub(crate) next_handle: AtomicU64,
    pub(crate) shutdown: watch::Sender<bool>,
    /// Turns true once a `close()` has given back what was held.
    pub(crate) closed: Arc<watch::Sender<bool>>,
}

impl Drop for Context {
    fn drop(&mut self) {
        self.shutdown.send_replace(true);
    }
}

impl Context {
    /// The context of a client just connected to `deployment`.
    pub(crate) fn new(
        prefix: String,
        display: String,
        connect_timeout: Duration,
        deployment: Arc<Deployment>,
        telemetry: Arc<Telemetry>,
        face: &str,
    ) -> Arc<Context> {
        let (shutdown, _) = watch::channel(false);
        let redlock = deployment.is_redlock();
        let id = uuid::Uuid::new_v4().to_string();
        let key = crate::keys::client_key(&prefix, &id);
        let registration = Arc::new(Registration::new(key, id.clone(), face, &deployment));
        Arc::new(Context {
            prefix,
            id,
            registration,
            display,
            connect_timeout,
            runtime: tokio::runtime::Handle::current(),
            holdings: Arc::new(Holdings::new(telemetry.clone())),
            telemetry,
            waiters: Waiters::new(tokio::runtime::Handle::current()),
            owner_mutexes: OwnerMutexTable::default(),
            feeds_started: Once::new(),
            next_handle: AtomicU64::new(1),
            shutdown,
            closed: Arc::new(watch::channel(false).0),
            deployment: Connections {
                open: Mutex::new(Some(deployment)),
                redlock,
            },
        })
    }

    /// Writes this client's registration again in the background when it
    /// is due (an acquisition or a waiter's attempt: see `registration.rs`).
    pub(crate) fn refresh_registration(&self) {
        if !self.registration.due() {
            return;
        }
        let Ok(deployment) = self.deployment.current() else {
            return;
        };
        let (registration, telemetry) = (self.registration.clone(), self.telemetry.clone());
        self.runtime
            .spawn(async move { registration.renew(&deployment, &telemetry).await });
    }

    /// What a background task of this client hears its shutdown by.
    pub(crate) fn shutdown_signal(&self) -> Shutdown {
        Shutdown::of(&self.shutdown)
    }

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
            for member in deployment.members() {
                let requests = self.waiters.add_feed();
                self.runtime.spawn(crate::wakeups::feed::run(
                    member.feed(),
                    member.server(),
                    self.telemetry.clone(),
                    Arc::downgrade(&self.waiters),
                    requests,
                    self.shutdown_signal(),
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

/// The client's way to its deployment, open until `close()`: every request of
/// a lock goes through here, so a closed client refuses them all with
/// [`Error::Closed`] before any I/O, and dropping the deployment here (with
/// the background tasks' handles) closes its connections.
pub(crate) struct Connections {
    open: Mutex<Option<Arc<Deployment>>>,
    redlock: bool,
}

impl Connections {
    pub(crate) fn current(&self) -> Result<Arc<Deployment>> {
        let open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        open.clone().ok_or(Error::Closed)
    }

    /// Shuts the way; the deployment to close, the first time only.
    pub(crate) fn close(&self) -> Option<Arc<Deployment>> {
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

    pub(crate) fn inspect_many_holder<'a>(
        &'a self,
        keys: &'a Keys,
    ) -> Request<'a, ManyHolderState> {
        Box::pin(async move { self.current()?.inspect_many_holder(keys).await })
    }
}

/// A request through [`Connections`]. Boxed as a `dyn Future + Send`, so a
/// caller proves `Send` of its own future without walking the whole exchange
/// with Redis again (spawning a lock operation otherwise overflows the
/// compiler's recursion limit).
pub(crate) type Request<'a, T> = Pin<Box<dyn Future<Output = Result<T>> + Send + 'a>>;
