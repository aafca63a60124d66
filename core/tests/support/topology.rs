//! Multi-server topologies for the deployment tests: a Redis Cluster built
//! with `redis-cli --cluster create`, and a Sentinel group (primary, replica,
//! three sentinels). All on loopback, all stopped when dropped.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::RedisServer;

/// Polls `cond` until it holds or `within` passes (blocking; set-up only).
pub fn wait_until(within: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn info(server: &RedisServer, section: &str) -> String {
    server
        .sync_conn()
        .and_then(|mut c| redis::cmd("INFO").arg(section).query::<String>(&mut c))
        .unwrap_or_default()
}

fn cluster_info(server: &RedisServer) -> String {
    server
        .sync_conn()
        .and_then(|mut c| redis::cmd("CLUSTER").arg("INFO").query::<String>(&mut c))
        .unwrap_or_default()
}

pub struct RedisCluster {
    pub nodes: Vec<RedisServer>,
}

impl RedisCluster {
    /// `masters` masters, each with `replicas` replicas.
    pub fn start(masters: usize, replicas: usize) -> Self {
        let nodes: Vec<RedisServer> = (0..masters * (1 + replicas))
            .map(|_| {
                // The bus port defaults to port + 10000, which may not exist
                // for a high free port: choose it too.
                let bus = super::free_port().to_string();
                RedisServer::start_with(&[
                    "--cluster-enabled",
                    "yes",
                    "--cluster-port",
                    &bus,
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    "1000",
                ])
            })
            .collect();
        let addrs: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let status = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addrs)
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("redis-cli is installed with redis-server");
        assert!(status.success(), "redis-cli --cluster create failed");
        let cluster = RedisCluster { nodes };
        cluster.wait_healthy();
        // A replica that never synced is never promoted: wait for every link.
        wait_until(Duration::from_secs(30), "replicas in sync", || {
            cluster.nodes.iter().all(|n| {
                let r = info(n, "replication");
                r.contains("role:master") || r.contains("master_link_status:up")
            })
        });
        cluster
    }

    /// Kills the master serving `key` and waits until a replica took over.
    pub fn fail_over(&mut self, key: &str) -> usize {
        let victim = self.master_of(key);
        self.nodes[victim].stop();
        wait_until(Duration::from_secs(30), "a replica promoted", || {
            let now = self.master_of(key);
            now != victim && now != usize::MAX
        });
        self.wait_healthy();
        victim
    }

    /// Waits until every live node says the cluster is ok.
    pub fn wait_healthy(&self) {
        wait_until(Duration::from_secs(30), "cluster_state:ok", || {
            self.nodes
                .iter()
                .filter(|n| n.is_running())
                .all(|n| cluster_info(n).contains("cluster_state:ok"))
        });
    }

    pub fn seed_urls(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.url()).collect()
    }

    /// The node currently serving `key` as master.
    pub fn master_of(&self, key: &str) -> usize {
        let live = self.nodes.iter().position(|n| n.is_running()).unwrap();
        let slot: i64 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query(&mut self.nodes[live].conn())
            .unwrap();
        let nodes: String = redis::cmd("CLUSTER")
            .arg("NODES")
            .query(&mut self.nodes[live].conn())
            .unwrap();
        for line in nodes.lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let port: u16 = fields[1].split(['@', ':']).nth(1).unwrap().parse().unwrap();
            let running = self.nodes.iter().any(|n| n.port == port && n.is_running());
            if !fields[2].contains("master") || fields[2].contains("fail") || !running {
                continue;
            }
            for range in &fields[8..] {
                let (lo, hi) = range.split_once('-').unwrap_or((range, range));
                let (Ok(lo), Ok(hi)) = (lo.parse::<i64>(), hi.parse::<i64>()) else {
                    continue;
                };
                if (lo..=hi).contains(&slot) {
                    return self.nodes.iter().position(|n| n.port == port).unwrap();
                }
            }
        }
        usize::MAX // no live master serves it (yet)
    }
}

pub struct SentinelGroup {
    pub primary: RedisServer,
    pub replica: RedisServer,
    sentinels: Vec<(u16, Child, std::path::PathBuf)>,
}

impl SentinelGroup {
    pub const SERVICE: &'static str = "rlockmaster";

    pub fn start() -> Self {
        let primary = RedisServer::start();
        let replica =
            RedisServer::start_with(&["--replicaof", "127.0.0.1", &primary.port.to_string()]);
        wait_until(Duration::from_secs(20), "replica in sync", || {
            info(&replica, "replication").contains("master_link_status:up")
        });
        let sentinels = (0..3)
            .map(|_| {
                let port = super::free_port();
                let dir = std::env::temp_dir().join(format!("rlock-sentinel-{}-{port}", std::process::id()));
                std::fs::create_dir_all(&dir).unwrap();
                let conf = dir.join("sentinel.conf");
                std::fs::write(
                    &conf,
                    format!(
                        "port {port}\nbind 127.0.0.1\ndir {}\nsentinel monitor {} 127.0.0.1 {} 2\n\
                         sentinel down-after-milliseconds {} 500\nsentinel failover-timeout {} 3000\n\
                         sentinel parallel-syncs {} 1\n",
                        dir.display(),
                        Self::SERVICE,
                        primary.port,
                        Self::SERVICE,
                        Self::SERVICE,
                        Self::SERVICE
                    ),
                )
                .unwrap();
                let child = Command::new("redis-server")
                    .arg(&conf)
                    .arg("--sentinel")
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap();
                (port, child, dir)
            })
            .collect();
        let group = SentinelGroup {
            primary,
            replica,
            sentinels,
        };
        wait_until(
            Duration::from_secs(30),
            "sentinels see the primary and replica",
            || {
                group.sentinels.iter().all(|(port, _, _)| {
                    let Ok(mut c) = redis::Client::open(format!("redis://127.0.0.1:{port}"))
                        .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(1)))
                    else {
                        return false;
                    };
                    let replicas: redis::RedisResult<Vec<redis::Value>> = redis::cmd("SENTINEL")
                        .arg("REPLICAS")
                        .arg(Self::SERVICE)
                        .query(&mut c);
                    replicas.is_ok_and(|r| !r.is_empty())
                })
            },
        );
        group
    }

    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .sentinels
            .iter()
            .map(|(p, _, _)| format!("127.0.0.1:{p}"))
            .collect();
        format!("redis+sentinel://{}/{}", hosts.join(","), Self::SERVICE)
    }

    /// The port Sentinel currently names as the master.
    pub fn master_port(&self) -> u16 {
        let (port, _, _) = &self.sentinels[0];
        let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}"))
            .unwrap()
            .get_connection_with_timeout(Duration::from_secs(1))
            .unwrap();
        let (_, p): (String, String) = redis::cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(Self::SERVICE)
            .query(&mut c)
            .unwrap();
        p.parse().unwrap()
    }
}

impl Drop for SentinelGroup {
    fn drop(&mut self) {
        for (_, child, dir) in &mut self.sentinels {
            let _ = child.kill();
            let _ = child.wait();
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}
