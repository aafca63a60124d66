//! Test support: a real `redis-server` on a free loopback port, stopped when
//! dropped. The one place the Rust tests start Redis.
#![allow(dead_code)] // each test file uses a different part of it

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
    extra: Vec<String>,
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
        let dir =
            std::env::temp_dir().join(format!("rlock-test-{}-{}", std::process::id(), free_port()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut server = RedisServer {
            port: free_port(),
            child: None,
            dir,
            extra: extra.iter().map(|s| s.to_string()).collect(),
        };
        server.spawn();
        server
    }

    fn spawn(&mut self) {
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args([
                "--save",
                "",
                "--appendonly",
                "no",
                "--enable-debug-command",
                "local",
                "--dir",
            ])
            .arg(&self.dir)
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server must be installed (make test installs it)");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            // Any RESP reply (even NOAUTH) means the server is up.
            if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", self.port)) {
                let mut buf = [0u8; 1];
                if s.write_all(b"PING\r\n").is_ok() && s.read(&mut buf).is_ok_and(|n| n == 1) {
                    return;
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("redis-server did not start on port {}", self.port);
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// A plain blocking connection, for the test's own observations.
    pub fn sync_conn(&self) -> redis::RedisResult<redis::Connection> {
        redis::Client::open(self.url())?.get_connection_with_timeout(Duration::from_secs(1))
    }

    pub fn conn(&self) -> redis::Connection {
        self.sync_conn().expect("connect to test redis")
    }

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

    /// Starts the server again on the same port with the same settings (and,
    /// without persistence, no data).
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

/// Runs `test` of the current test binary as a separate process, with
/// `args` in the environment: for tests that need a second process. The
/// worker is an ignored test, so it never runs (or counts) on its own.
pub fn worker_process(test: &str, args: &[String]) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            test,
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env("RLOCK_WORKER_ARGS", args.join(" "))
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
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
