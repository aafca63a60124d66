//! A loopback TCP proxy in front of one redis-server that injects the
//! network faults a lock must survive, deterministically: a request Redis
//! applied whose reply never arrives (the connection is reset after the
//! request was forwarded), a request that never arrives (reset before), a
//! wire down until healed, and replies delivered late on pub/sub
//! connections or on every connection. Faults are armed by a byte pattern
//! the request carries (a script's SHA, an argument such as `PUBLISH`), so
//! a test picks the exact request; the requests carrying a pattern can be
//! counted too (to know a client has sent one before the fault).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Notify};
use tokio::time::Instant;

use crate::RedisServer;

/// Where a reset falls relative to the request that triggers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// Redis never sees the request.
    BeforeForward,
    /// Redis applies the request; its reply is dropped and the client reset.
    AfterForward,
}

#[derive(Default)]
struct Rules {
    /// (pattern, where, how many more times)
    cuts: Vec<(Vec<u8>, Cut, usize)>,
    /// Every request is cut before Redis sees it (the wire is down).
    severed: bool,
    /// (pattern, how many requests carrying it reached Redis)
    counted: Vec<(Vec<u8>, usize)>,
    pubsub_delay: Duration,
    reply_delay: Duration,
}

pub struct FaultProxy {
    pub port: u16,
    rules: Arc<Mutex<Rules>>,
    cuts_done: Arc<AtomicUsize>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

impl FaultProxy {
    /// Starts a proxy to `127.0.0.1:target` on a free loopback port, on a
    /// thread of its own (so it runs beside any test runtime).
    pub fn start(target: u16) -> Self {
        let listener =
            std::net::TcpListener::bind("127.0.0.1:0").expect("no loopback port for the proxy");
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let rules = Arc::new(Mutex::new(Rules::default()));
        let cuts_done = Arc::new(AtomicUsize::new(0));
        let (r, c) = (rules.clone(), cuts_done.clone());
        let (stop, mut stopped) = tokio::sync::oneshot::channel();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let listener = TcpListener::from_std(listener).unwrap();
                loop {
                    tokio::select! {
                        _ = &mut stopped => return,
                        accepted = listener.accept() => match accepted {
                            Ok((client, _)) => {
                                tokio::spawn(relay(client, target, r.clone(), c.clone()));
                            }
                            Err(_) => return,
                        },
                    }
                }
            });
        });
        FaultProxy {
            port,
            rules,
            cuts_done,
            stop: Some(stop),
        }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The next `times` requests carrying `pattern` are cut as `cut` says.
    pub fn cut_on(&self, pattern: &[u8], cut: Cut, times: usize) {
        self.rules
            .lock()
            .unwrap()
            .cuts
            .push((pattern.to_vec(), cut, times));
    }

    /// How many cuts were made so far.
    pub fn cuts_done(&self) -> usize {
        self.cuts_done.load(Ordering::SeqCst)
    }

    /// Takes the wire down: from now on every request, on any connection,
    /// is cut before Redis sees it, until [`heal`](Self::heal).
    pub fn sever(&self) {
        self.rules.lock().unwrap().severed = true;
    }

    /// Brings the wire back after [`sever`](Self::sever).
    pub fn heal(&self) {
        self.rules.lock().unwrap().severed = false;
    }

    /// Counts, from now on, the requests carrying `pattern` that reach
    /// Redis (see [`seen`](Self::seen)).
    pub fn count(&self, pattern: &[u8]) {
        self.rules
            .lock()
            .unwrap()
            .counted
            .push((pattern.to_vec(), 0));
    }

    /// How many requests carrying `pattern` reached Redis since
    /// [`count`](Self::count) was called with it.
    pub fn seen(&self, pattern: &[u8]) -> usize {
        let rules = self.rules.lock().unwrap();
        rules
            .counted
            .iter()
            .find(|(p, _)| p == pattern)
            .map_or(0, |(_, n)| *n)
    }

    /// Delays what Redis sends on pub/sub connections (messages included).
    pub fn delay_pubsub(&self, delay: Duration) {
        self.rules.lock().unwrap().pubsub_delay = delay;
    }

    /// Delays every reply on every connection.
    pub fn delay_replies(&self, delay: Duration) {
        self.rules.lock().unwrap().reply_delay = delay;
    }
}

/// What a request of the core's script `name` carries ("mutex release",
/// "cache read", see `rlock_core::script`): the SHA it is sent by, for
/// [`FaultProxy::cut_on`] and [`FaultProxy::count`]. The script is loaded
/// into `server` first, so a request cut after it was forwarded is run by
/// Redis, not answered NOSCRIPT (and sent again as EVAL, without the SHA).
pub fn script(server: &RedisServer, name: &str) -> Vec<u8> {
    let source = rlock_core::script::source(name)
        .unwrap_or_else(|| panic!("the core sends no script named {name:?}"));
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(source)
        .query(&mut server.conn())
        .unwrap();
    sha.into_bytes()
}

/// A server, a fault proxy in front of it, and a client that reaches the
/// server only through the proxy.
pub async fn behind_proxy() -> (RedisServer, FaultProxy, rlock_core::Client) {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port);
    let client = rlock_core::Client::connect(&proxy.url()).await.unwrap();
    (server, proxy, client)
}

async fn relay(
    client: TcpStream,
    target: u16,
    rules: Arc<Mutex<Rules>>,
    cuts_done: Arc<AtomicUsize>,
) {
    let Ok(server) = TcpStream::connect(("127.0.0.1", target)).await else {
        return;
    };
    // A reset, not a graceful close: what a dropped wire looks like.
    #[allow(deprecated)] // the reset is the point; this thread may block on it
    let _ = client.set_linger(Some(Duration::ZERO));
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (mut client_rx, mut client_tx) = client.into_split();
    let (mut server_rx, mut server_tx) = server.into_split();
    let pubsub = Arc::new(AtomicBool::new(false));
    let dropping = Arc::new(AtomicBool::new(false));
    let kill = Arc::new(Notify::new());

    let delays = rules.clone();
    let upstream = {
        let (pubsub, dropping, kill) = (pubsub.clone(), dropping.clone(), kill.clone());
        async move {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                let n = match client_rx.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => n,
                };
                let chunk = &buf[..n];
                if contains(chunk, b"SUBSCRIBE") {
                    pubsub.store(true, Ordering::SeqCst);
                }
                let cut = {
                    let mut rules = rules.lock().unwrap();
                    if rules.severed {
                        cuts_done.fetch_add(1, Ordering::SeqCst);
                        kill.notify_one();
                        return;
                    }
                    let hit = rules
                        .cuts
                        .iter_mut()
                        .find(|(p, _, left)| *left > 0 && contains(chunk, p));
                    let cut = hit.map(|(_, cut, left)| {
                        *left -= 1;
                        *cut
                    });
                    if cut != Some(Cut::BeforeForward) {
                        for (p, n) in rules.counted.iter_mut() {
                            if contains(chunk, p) {
                                *n += 1;
                            }
                        }
                    }
                    cut
                };
                match cut {
                    None => {}
                    Some(Cut::BeforeForward) => {
                        cuts_done.fetch_add(1, Ordering::SeqCst);
                        kill.notify_one();
                        return;
                    }
                    Some(Cut::AfterForward) => {
                        dropping.store(true, Ordering::SeqCst);
                        let _ = server_tx.write_all(chunk).await;
                        // Long enough for Redis to run it and answer.
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        cuts_done.fetch_add(1, Ordering::SeqCst);
                        kill.notify_one();
                        return;
                    }
                }
                if server_tx.write_all(chunk).await.is_err() {
                    return;
                }
            }
        }
    };

    let (tx, mut rx) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let downstream_read = async move {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match server_rx.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    if tx.send((Instant::now(), buf[..n].to_vec())).is_err() {
                        return;
                    }
                }
            }
        }
    };
    let downstream_write = async move {
        while let Some((at, bytes)) = rx.recv().await {
            if dropping.load(Ordering::SeqCst) {
                continue;
            }
            let delay = {
                let rules = delays.lock().unwrap();
                match pubsub.load(Ordering::SeqCst) {
                    true => rules.pubsub_delay.max(rules.reply_delay),
                    false => rules.reply_delay,
                }
            };
            if !delay.is_zero() {
                tokio::time::sleep_until(at + delay).await;
            }
            if dropping.load(Ordering::SeqCst) || client_tx.write_all(&bytes).await.is_err() {
                return;
            }
        }
    };
    tokio::select! {
        _ = kill.notified() => {}
        _ = upstream => {}
        _ = async { tokio::join!(downstream_read, downstream_write) } => {}
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}
