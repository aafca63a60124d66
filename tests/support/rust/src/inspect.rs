//! What a test reads from, or does to, a server behind the client's back:
//! ACL users, a silent handoff, subscribers, a stall, command counts.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::{Monitor, RedisServer};

impl RedisServer {
    /// Adds an ACL user allowed exactly `rules` (after `reset`), e.g.
    /// `["~rlock:*", "+evalsha"]`.
    pub fn add_user(&self, user: &str, password: &str, rules: &[&str]) {
        // `reset` leaves a user every channel on Redis 6.2 (its default
        // acl-pubsub-default, changed in 7.0), where `&pattern` is then an
        // error: `resetchannels` makes the user's channels `rules`' alone.
        let _: () = redis::cmd("ACL")
            .arg("SETUSER")
            .arg(user)
            .arg("reset")
            .arg("resetchannels")
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
        let keys = rlock_core::Keys::new("rlock", name);
        let key = &keys.lock;
        let mut c = self.conn();
        let fence: u64 = redis::cmd("INCR").arg(&keys.fence).query(&mut c).unwrap();
        let _: () = redis::pipe()
            .cmd("DEL")
            .arg(key)
            .ignore()
            .cmd("HSET")
            .arg(key)
            .arg("owner")
            .arg(owner)
            .arg("count")
            .arg(1)
            .arg("fence")
            .arg(fence)
            .ignore()
            .cmd("PEXPIRE")
            .arg(key)
            .arg(30_000)
            .ignore()
            .cmd("LPOP")
            .arg(&keys.queue)
            .ignore()
            .cmd("HDEL")
            .arg(&keys.leases)
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

    /// Calls of one command (lower case, like `evalsha`) from INFO
    /// commandstats; note that it also counts calls made inside scripts.
    pub fn calls(&self, command: &str) -> u64 {
        self.info("commandstats")
            .lines()
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

    /// One INFO section, empty while the server does not answer (set-up
    /// polls it until a state shows).
    pub fn info(&self, section: &str) -> String {
        self.sync_conn()
            .and_then(|mut c| redis::cmd("INFO").arg(section).query::<String>(&mut c))
            .unwrap_or_default()
    }
}
