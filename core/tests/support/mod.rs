//! Test support: a real `redis-server` on a free loopback port, stopped when
//! dropped. The one place the Rust tests start Redis.
#![allow(dead_code)] // each test file uses a different part of it

pub mod proxy;
pub mod topology;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub struct RedisServer {
    pub port: u16,
    child: Option<Child>,
    dir: std::path::PathBuf,
    /// What the server was started with (beyond the common settings), so a
    /// restart brings back the same server.
    args: Vec<String>,
    /// The CA (PEM) that signed the certificate of a TLS-only server.
    tls_ca: Option<Vec<u8>>,
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("no free loopback port")
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

    /// Starts a one-node Redis Cluster that serves every slot. Scripts there
    /// refuse keys of different slots (CROSSSLOT), and it answers
    /// [`keyslot`](Self::keyslot).
    pub fn start_cluster_node() -> Self {
        let args = |port: u16| {
            [
                "--port",
                &port.to_string(),
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
                "--cluster-port",
                &free_port().to_string(),
            ]
            .map(String::from)
            .to_vec()
        };
        let server = Self::launch(args, |_| None);
        let mut conn = server.conn();
        let _: () = redis::cmd("CLUSTER")
            .arg("ADDSLOTSRANGE")
            .arg(0)
            .arg(16383)
            .query(&mut conn)
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let info: String = redis::cmd("CLUSTER").arg("INFO").query(&mut conn).unwrap();
            if info.lines().any(|l| l.trim() == "cluster_state:ok") {
                return server;
            }
            assert!(
                Instant::now() < deadline,
                "the one-node cluster never came up"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Starts `redis-server` with `args(port)` on a free port, in a fresh
    /// directory that `prepare` may fill first (certificates); it returns the
    /// CA to trust.
    fn launch(
        args: impl Fn(u16) -> Vec<String>,
        prepare: impl FnOnce(&std::path::Path) -> Option<Vec<u8>>,
    ) -> Self {
        let dir =
            std::env::temp_dir().join(format!("rlock-test-{}-{}", std::process::id(), free_port()));
        std::fs::create_dir_all(&dir).unwrap();
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
    /// first (its port was taken).
    fn try_spawn(&mut self) -> bool {
        let child = Command::new("redis-server")
            .args(["--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .args(["--enable-debug-command", "local", "--dir"])
            .arg(&self.dir)
            .args(&self.args)
            .current_dir(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
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
        // Any RESP reply (even NOAUTH) means the server is up.
        let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
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

    /// Adds an ACL user allowed exactly `rules` (after `reset`), e.g.
    /// `["~rlock:*", "+evalsha"]`.
    pub fn add_user(&self, user: &str, password: &str, rules: &[&str]) {
        let _: () = redis::cmd("ACL")
            .arg("SETUSER")
            .arg(user)
            .arg("reset")
            .arg("on")
            .arg(format!(">{password}"))
            .arg(rules)
            .query(&mut self.conn())
            .unwrap();
    }

    /// Hands lock `name` (prefix `rlock`) to `owner`, first in its line, the
    /// way release.lua does but without the handoff message (as if that were
    /// lost or not read yet); returns the new fencing token.
    pub fn hand_over_silently(&self, name: &str, owner: &str) -> u64 {
        let key = format!("rlock:{{{name}}}");
        let mut c = self.conn();
        let fence: u64 = redis::cmd("INCR")
            .arg(format!("{key}:fence"))
            .query(&mut c)
            .unwrap();
        let _: () = redis::pipe()
            .cmd("DEL")
            .arg(&key)
            .ignore()
            .cmd("HSET")
            .arg(&key)
            .arg("owner")
            .arg(owner)
            .arg("count")
            .arg(1)
            .arg("fence")
            .arg(fence)
            .ignore()
            .cmd("PEXPIRE")
            .arg(&key)
            .arg(30_000)
            .ignore()
            .cmd("LPOP")
            .arg(format!("{key}:queue"))
            .ignore()
            .cmd("HDEL")
            .arg(format!("{key}:leases"))
            .arg(owner)
            .ignore()
            .query(&mut c)
            .unwrap();
        fence
    }

    /// How many connections are subscribed to `channel`.
    pub fn subscribers(&self, channel: &str) -> i64 {
        let (_, n): (Vec<u8>, i64) = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg(channel)
            .query(&mut self.conn())
            .unwrap();
        n
    }

    /// Stalls the server for `seconds` (DEBUG SLEEP) and returns once it has
    /// stopped answering; join the handle to wait for it to come back.
    pub fn stall(&self, seconds: f64) -> std::thread::JoinHandle<()> {
        let url = self.url();
        let sleeper = std::thread::spawn(move || {
            let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
            let _: () = redis::cmd("DEBUG")
                .arg("SLEEP")
                .arg(seconds)
                .query(&mut c)
                .unwrap();
        });
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let mut probe = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
            probe
                .set_read_timeout(Some(Duration::from_millis(50)))
                .unwrap();
            probe.write_all(b"PING\r\n").unwrap();
            if probe.read(&mut [0u8; 16]).is_err() {
                return sleeper; // no answer within 50 ms: stalled
            }
            assert!(
                Instant::now() < deadline,
                "DEBUG SLEEP never stalled the server"
            );
        }
    }

    /// The Cluster hash slot of `key`, as a Cluster node computes it.
    pub fn keyslot(&self, key: &str) -> u16 {
        redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query(&mut self.conn())
            .unwrap()
    }

    pub fn conn(&self) -> redis::Connection {
        self.sync_conn().expect("connect to test redis")
    }

    /// Kills the server (SIGKILL: no goodbye to clients).
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

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

    /// Calls of one command (lower case, like `evalsha`) from INFO
    /// commandstats; note that it also counts calls made inside scripts.
    pub fn calls(&self, command: &str) -> u64 {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(&mut self.conn())
            .unwrap();
        info.lines()
            .filter_map(|l| l.strip_prefix("cmdstat_"))
            .filter_map(|l| l.split_once(':'))
            .find(|(name, _)| *name == command)
            .and_then(|(_, rest)| rest.split(',').find_map(|f| f.strip_prefix("calls=")))
            .map_or(0, |n| n.parse().unwrap())
    }

    /// Starts watching, through MONITOR, every command clients send.
    pub fn monitor(&self) -> Monitor {
        Monitor::start(self.port)
    }
}

/// Records the commands clients send (not those scripts run inside Redis),
/// in the order the server executed them.
pub struct Monitor {
    seen: Arc<Mutex<Vec<String>>>,
    marker: TcpStream,
    marks: usize,
    consumed: usize,
}

impl Monitor {
    fn start(port: u16) -> Self {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream.write_all(b"MONITOR\r\n").unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut ok = String::new();
        reader.read_line(&mut ok).unwrap();
        assert_eq!(ok.trim(), "+OK");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        std::thread::spawn(move || {
            for line in reader.lines() {
                let Ok(line) = line else { return };
                // `+ts [db addr] "cmd" ...`; script calls show `[db lua]`.
                let Some((source, rest)) = line.split_once("] ") else {
                    continue;
                };
                if source.ends_with(" lua") {
                    continue;
                }
                let cmd = rest.split('"').nth(1).unwrap_or("").to_ascii_lowercase();
                let arg = rest.split('"').nth(3).unwrap_or("").to_owned();
                sink.lock().unwrap().push(if cmd == "echo" {
                    format!("echo {arg}")
                } else {
                    cmd
                });
            }
        });
        let marker = TcpStream::connect(("127.0.0.1", port)).unwrap();
        Monitor {
            seen,
            marker,
            marks: 0,
            consumed: 0,
        }
    }

    /// The commands clients sent since the previous mark (or the start), made
    /// exact by a marker command the server executes after all of them.
    pub fn mark(&mut self) -> Vec<String> {
        self.marks += 1;
        let marker = format!("echo rlock-mark-{}", self.marks);
        let cmd = format!("ECHO rlock-mark-{}\r\n", self.marks);
        self.marker.write_all(cmd.as_bytes()).unwrap();
        let mut reply = [0u8; 64];
        let _ = self.marker.read(&mut reply).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            {
                let seen = self.seen.lock().unwrap();
                if let Some(at) = seen[self.consumed..].iter().position(|c| *c == marker) {
                    let out = seen[self.consumed..self.consumed + at].to_vec();
                    self.consumed += at + 1;
                    return out;
                }
            }
            assert!(Instant::now() < deadline, "MONITOR never showed the marker");
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Makes, in `dir`, a CA (`ca.crt`, `ca.key`) and a certificate for 127.0.0.1
/// and localhost signed by it (`server.crt`, `server.key`), with Debian's
/// `openssl` (EC P-256 keys: quick to make).
fn make_certificates(dir: &std::path::Path) {
    let openssl = |args: &[&str]| {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("openssl must be installed (make test installs it)");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    openssl(
        &[
            &["req", "-x509"][..],
            &ec,
            &["-keyout", "ca.key", "-out", "ca.crt"],
            &["-subj", "/CN=rlock test CA", "-days", "2"],
        ]
        .concat(),
    );
    openssl(
        &[
            &["req"][..],
            &ec,
            &["-keyout", "server.key", "-out", "server.csr"],
            &["-subj", "/CN=localhost"],
        ]
        .concat(),
    );
    std::fs::write(
        dir.join("server.ext"),
        "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\n\
         extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n",
    )
    .unwrap();
    openssl(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.crt",
        "-days",
        "2",
        "-extfile",
        "server.ext",
    ]);
}

/// The outcome of a spawned task, which must finish `within`.
pub async fn finished<T>(task: tokio::task::JoinHandle<T>, within: Duration) -> T {
    tokio::time::timeout(within, task)
        .await
        .expect("the task did not finish in time")
        .expect("the task panicked")
}

/// Runs every lock in `locks` concurrently, each taking its lock `rounds`
/// times and incrementing a counter on `data` with GET then SET inside it:
/// not atomic, so only mutual exclusion keeps the count exact. Returns it.
pub async fn contend(locks: Vec<rlock_core::Lock>, rounds: usize, data: &str) -> i64 {
    let data = redis::Client::open(data).unwrap();
    let mut tasks = Vec::new();
    for lock in locks {
        let data = data.clone();
        tasks.push(tokio::spawn(async move {
            let mut conn = data.get_multiplexed_async_connection().await.unwrap();
            for _ in 0..rounds {
                lock.acquire(rlock_core::Wait::Forever).await.unwrap();
                let n: Option<i64> = redis::cmd("GET")
                    .arg("counted")
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                let _: () = redis::cmd("SET")
                    .arg("counted")
                    .arg(n.unwrap_or(0) + 1)
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                lock.release().await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let mut conn = data.get_multiplexed_async_connection().await.unwrap();
    redis::cmd("GET")
        .arg("counted")
        .query_async(&mut conn)
        .await
        .unwrap()
}

/// Runs `test` of the current test binary as a separate process, with
/// `args` in the environment: for tests that need a second process. The
/// worker is an ignored test, so it never runs (or counts) on its own.
pub fn worker_process(test: &str, args: &[String]) -> std::process::Child {
    worker_command(test, args)
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

/// The command [`worker_process`] runs, for a caller that wires its stdio.
pub fn worker_command(test: &str, args: &[String]) -> Command {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args([
        "--ignored",
        "--exact",
        test,
        "--nocapture",
        "--test-threads",
        "1",
        "--quiet",
    ])
    .env("RLOCK_WORKER_ARGS", args.join(" "));
    c
}

/// The arguments a [`worker_process`] was started with.
pub fn worker_args() -> Vec<String> {
    std::env::var("RLOCK_WORKER_ARGS")
        .expect("started by worker_process")
        .split(' ')
        .map(str::to_owned)
        .collect()
}

/// Polls `cond` until it holds or `within` passes; for observing state that
/// has no event to wait on (a key's TTL in Redis).
pub async fn eventually(within: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if cond() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    cond()
}
