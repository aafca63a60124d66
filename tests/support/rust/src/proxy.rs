//! A loopback TCP proxy in front of one redis-server that injects the
//! network faults a lock must survive, deterministically: a request Redis
//! applied whose reply never arrives (the connection is reset after the
//! request was forwarded), a request that never arrives (reset before), and
//! replies delivered late on pub/sub connections or on every connection.
//! Faults are armed by a byte pattern the request carries (a script's SHA,
//! an argument such as `PUBLISH`), so a test picks the exact request.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Notify};
use tokio::time::Instant;

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

    /// Delays what Redis sends on pub/sub connections (messages included).
    pub fn delay_pubsub(&self, delay: Duration) {
        self.rules.lock().unwrap().pubsub_delay = delay;
    }

    /// Delays every reply on every connection.
    pub fn delay_replies(&self, delay: Duration) {
        self.rules.lock().unwrap().reply_delay = delay;
    }
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
                    let hit = rules
                        .cuts
                        .iter_mut()
                        .find(|(p, _, left)| *left > 0 && contains(chunk, p));
                    hit.map(|(_, cut, left)| {
                        *left -= 1;
                        *cut
                    })
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
