//! One `redis-server` on a free loopback port, in a directory of its own,
//! stopped and cleaned up when dropped.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::certificates::make_certificates;
use crate::free_port;

/// A command that runs the server binary: Debian's `redis-server` unless
/// `RLOCK_REDIS_SERVER` names another (`make test-matrix` points it at Redis
/// 6.2, 8.2 and Valkey 8.1 in `.servers/`). The one place that names it, for
/// every server, Sentinel included.
pub(crate) fn server_command() -> Command {
    match std::env::var_os("RLOCK_REDIS_SERVER") {
        Some(path) if !path.is_empty() => Command::new(path),
        _ => Command::new("redis-server"),
    }
}

/// The server binary's (major, minor), from `--version` (Valkey numbers its
/// own: every Valkey has what Redis 7.2 has).
pub(crate) fn server_version() -> (u32, u32) {
    static VERSION: OnceLock<(u32, u32)> = OnceLock::new();
    *VERSION.get_or_init(|| {
        let out = server_command()
            .arg("--version")
            .output()
            .expect("redis-server must be installed (make test installs it)");
        let text = String::from_utf8_lossy(&out.stdout);
        text.split_whitespace()
            .find_map(|w| w.strip_prefix("v="))
            .and_then(|v| {
                let mut parts = v.split('.').map(|p| p.parse().ok());
                Some((parts.next()??, parts.next()??))
            })
            .unwrap_or_else(|| panic!("the server's --version names no version: {text:?}"))
    })
}

/// Panics, saying why, on a server too old for the lock's Cluster mode:
/// sharded pub/sub (its release messages) and `--cluster-port` came with
/// Redis 7.0 (`make test-matrix` leaves the Cluster tests out on 6.2).
pub(crate) fn require_cluster_support() {
    let (major, minor) = server_version();
    assert!(
        major >= 7,
        "a Redis Cluster here needs Redis 7.0 or later (sharded pub/sub): the server is {major}.{minor}"
    );
}

/// A directory made afresh under the system's temporary one: never another
/// server's (two sharing one share a Cluster node's nodes.conf, and with it
/// its node ID), nor one an earlier process left.
pub(crate) fn fresh_dir(prefix: &str) -> PathBuf {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("{prefix}-{}-{n}", std::process::id()));
        match std::fs::create_dir(&dir) {
            Ok(()) => return dir,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => panic!("cannot make {}: {e}", dir.display()),
        }
    }
}

/// The server's output, in its directory: why it exited, when it did.
const LOG: &str = "server.log";

pub struct RedisServer {
    pub port: u16,
    child: Option<Child>,
    dir: PathBuf,
    /// What the server was started with (beyond the common settings), so a
    /// restart brings back the same server.
    args: Vec<String>,
    /// The CA (PEM) that signed the certificate of a TLS-only server.
    tls_ca: Option<Vec<u8>>,
}

impl RedisServer {
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// Starts a server with extra `redis-server` arguments.
    pub fn start_with(extra: &[&str]) -> Self {
        let extra: Vec<String> = extra.iter().map(|a| a.to_string()).collect();
        Self::launch(
            |port| [vec!["--port".to_owned(), port.to_string()], extra.clone()].concat(),
            |_| None,
        )
    }

    /// Starts a server that speaks TLS only (`rediss://`), with a certificate
    /// for 127.0.0.1 and localhost signed by a CA made for it with `openssl`
    /// (see [`tls_ca_pem`](Self::tls_ca_pem)); clients need no certificate.
    pub fn start_tls() -> Self {
        let args = |port: u16| {
            [
                "--port",
                "0",
                "--tls-port",
                &port.to_string(),
                "--tls-cert-file",
                "server.crt",
                "--tls-key-file",
                "server.key",
                "--tls-ca-cert-file",
                "ca.crt",
                "--tls-auth-clients",
                "no",
            ]
            .map(String::from)
            .to_vec()
        };
        Self::launch(args, |dir| {
            make_certificates(dir);
            Some(std::fs::read(dir.join("ca.crt")).unwrap())
        })
    }

    /// Starts `redis-server` with `args(port)` on a free port, in a fresh
    /// directory that `prepare` may fill first (certificates); it returns the
    /// CA to trust.
    pub(crate) fn launch(
        args: impl Fn(u16) -> Vec<String>,
        prepare: impl FnOnce(&Path) -> Option<Vec<u8>>,
    ) -> Self {
        let dir = fresh_dir("rlock-test");
        let tls_ca = prepare(&dir);
        let port = free_port();
        let mut server = RedisServer {
            port,
            child: None,
            dir,
            args: args(port),
            tls_ca,
        };
        // Tests start servers in parallel: a port found free can be bound by
        // another test's server first, and redis-server then exits. It starts
        // again on other ports.
        for _ in 0..5 {
            if server.try_spawn() {
                return server;
            }
            server.port = free_port();
            server.args = args(server.port);
        }
        panic!("redis-server found its ports taken 5 times in a row");
    }

    fn spawn(&mut self) {
        assert!(
            self.try_spawn(),
            "redis-server exited at start on port {}",
            self.port
        );
    }

    /// Starts the server and waits until it answers; false when it exited
    /// first because its port was taken. Any other reason to exit (an option
    /// this server does not know, a build without TLS) fails at once, with
    /// the server's last words.
    fn try_spawn(&mut self) -> bool {
        let log_path = self.dir.join(LOG);
        let log = std::fs::File::create(&log_path).unwrap();
        let mut command = server_command();
        command
            .args(["--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"]);
        // DEBUG (for `stall`) is refused to clients from 7.0 on unless enabled;
        // 6.2 allows it and knows no such option.
        if server_version() >= (7, 0) {
            command.args(["--enable-debug-command", "local"]);
        }
        let child = command
            .arg("--dir")
            .arg(&self.dir)
            .args(&self.args)
            .current_dir(&self.dir)
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("redis-server must be installed (make test installs it)");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            // Whoever answers, it is this server only while this one runs.
            let answered = self.answers();
            let exited = self
                .child
                .as_mut()
                .is_some_and(|c| c.try_wait().is_ok_and(|status| status.is_some()));
            if exited {
                self.child = None;
                let said = std::fs::read_to_string(&log_path).unwrap_or_default();
                let lines: Vec<&str> = said.trim().lines().collect();
                // Or, before 7.0, a Cluster bus (the port + 10000) past 65535.
                assert!(
                    said.contains("Address already in use")
                        || said.contains("port number too high"),
                    "the server exited at start: {}",
                    lines[lines.len().saturating_sub(2)..].join(" / ")
                );
                return false;
            }
            if answered {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("redis-server did not start on port {}", self.port);
    }

    fn answers(&self) -> bool {
        if self.tls_ca.is_some() {
            return self.sync_conn().is_ok();
        }
        // Any RESP reply (even NOAUTH) means the server is up; whatever took
        // the port may never answer, so the wait for one is bounded.
        let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
        let mut buf = [0u8; 1];
        s.write_all(b"PING\r\n").is_ok() && s.read(&mut buf).is_ok_and(|n| n == 1)
    }

    pub fn url(&self) -> String {
        let scheme = if self.tls_ca.is_some() {
            "rediss"
        } else {
            "redis"
        };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    /// The URL of an ACL user, its name and password percent-encoded.
    pub fn url_as(&self, user: &str, password: &str) -> String {
        let encode = |s: &str| {
            s.bytes()
                .map(|b| match b {
                    b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                        (b as char).to_string()
                    }
                    _ => format!("%{b:02X}"),
                })
                .collect::<String>()
        };
        let (scheme, address) = self
            .url()
            .split_once("://")
            .map(|(s, a)| (s.to_owned(), a.to_owned()))
            .unwrap();
        format!("{scheme}://{}:{}@{address}", encode(user), encode(password))
    }

    /// The CA certificate (PEM) a client must trust to reach a TLS server.
    pub fn tls_ca_pem(&self) -> Option<&[u8]> {
        self.tls_ca.as_deref()
    }

    /// A blocking connection as the unrestricted default user, for the test's
    /// own observations (trusting the server's CA when it speaks TLS).
    pub fn sync_conn(&self) -> redis::RedisResult<redis::Connection> {
        let client = match &self.tls_ca {
            Some(ca) => {
                let certs = redis::TlsCertificates {
                    client_tls: None,
                    root_cert: Some(ca.clone()),
                };
                redis::Client::build_with_tls(self.url(), certs)?
            }
            None => redis::Client::open(self.url())?,
        };
        client.get_connection_with_timeout(Duration::from_secs(1))
    }

    pub fn conn(&self) -> redis::Connection {
        self.sync_conn().expect("connect to test redis")
    }

    /// Every key but the clients' registrations (`P:client:{ID}`, which
    /// each connected client keeps): what locks and caches left.
    pub fn data_keys(&self) -> Vec<String> {
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg("*")
            .query(&mut self.conn())
            .expect("KEYS");
        keys.into_iter()
            .filter(|k| !k.contains(":client:{"))
            .collect()
    }

    /// Whether the server runs: started and not stopped since.
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Kills the server (SIGKILL: no goodbye to clients).
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts the server again on the same port, with the same settings, empty.
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
