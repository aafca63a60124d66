//! Redis Cluster: one node that serves every slot, or a cluster built with
//! `redis-cli --cluster create`, masters with replicas that fail over.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::server::{require_cluster_support, server_version};
use crate::{free_port, wait_until, RedisServer};

impl RedisServer {
    /// Starts a one-node Redis Cluster that serves every slot. Scripts there
    /// refuse keys of different slots (CROSSSLOT), and it answers
    /// [`keyslot`](Self::keyslot). On a server older than 7.0 (no
    /// `--cluster-port`) its bus listens on the port + 10000, a port taken
    /// or too high there making it start again elsewhere; the lock refuses
    /// such a Cluster at connect.
    pub fn start_cluster_node() -> Self {
        let bus_port = server_version().0 >= 7;
        let args = |port: u16| {
            let mut args = [
                "--port",
                &port.to_string(),
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
            ]
            .map(String::from)
            .to_vec();
            if bus_port {
                args.extend(["--cluster-port".to_owned(), free_port().to_string()]);
            }
            args
        };
        let server = Self::launch(args, |_| None);
        let mut conn = server.conn();
        // ADDSLOTS rather than 7.0's ADDSLOTSRANGE: every server takes it.
        let _: () = redis::cmd("CLUSTER")
            .arg("ADDSLOTS")
            .arg((0..16384).collect::<Vec<u16>>())
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

    /// The Cluster hash slot of `key`, as a Cluster node computes it.
    pub fn keyslot(&self, key: &str) -> u16 {
        redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query(&mut self.conn())
            .unwrap()
    }

    /// CLUSTER INFO, empty while the node does not answer.
    fn cluster_info(&self) -> String {
        self.sync_conn()
            .and_then(|mut c| redis::cmd("CLUSTER").arg("INFO").query::<String>(&mut c))
            .unwrap_or_default()
    }
}

pub struct RedisCluster {
    pub nodes: Vec<RedisServer>,
}

impl RedisCluster {
    /// `masters` masters, each with `replicas` replicas.
    pub fn start(masters: usize, replicas: usize) -> Self {
        require_cluster_support();
        let nodes: Vec<RedisServer> = (0..masters * (1 + replicas))
            .map(|_| {
                // The bus port defaults to port + 10000, which may not exist
                // for a high free port: chosen too, afresh on each try (the
                // one chosen may be taken as well).
                let args = |port: u16| {
                    [
                        "--port",
                        &port.to_string(),
                        "--cluster-enabled",
                        "yes",
                        "--cluster-port",
                        &free_port().to_string(),
                        "--cluster-config-file",
                        "nodes.conf",
                        "--cluster-node-timeout",
                        "1000",
                    ]
                    .map(String::from)
                    .to_vec()
                };
                RedisServer::launch(args, |_| None)
            })
            .collect();
        let addrs: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let mut create = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addrs)
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-cli is installed with redis-server");
        // redis-cli waits for the nodes to agree with no deadline of its own.
        let deadline = Instant::now() + Duration::from_secs(60);
        let status = loop {
            if let Some(status) = create.try_wait().unwrap() {
                break status;
            }
            if Instant::now() >= deadline {
                let _ = create.kill();
                let _ = create.wait();
                panic!("redis-cli --cluster create did not finish within 60 s");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(status.success(), "redis-cli --cluster create failed");
        let cluster = RedisCluster { nodes };
        cluster.wait_healthy();
        // A replica that never synced is never promoted: wait for every link.
        wait_until(Duration::from_secs(30), "replicas in sync", || {
            cluster.nodes.iter().all(|n| {
                let r = n.info("replication");
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
                .all(|n| n.cluster_info().contains("cluster_state:ok"))
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

/// Moving a slot and promoting a replica by hand, the steps
/// `redis-cli --cluster reshard` and an operator's `CLUSTER FAILOVER` take.
impl RedisCluster {
    fn node_id(&self, i: usize) -> String {
        redis::cmd("CLUSTER")
            .arg("MYID")
            .query(&mut self.nodes[i].conn())
            .unwrap()
    }

    /// Moves the slot of `key` (with its keys) from the master serving it to
    /// master `to`, the way `redis-cli --cluster reshard` does: IMPORTING on
    /// the target, MIGRATING on the source, MIGRATE every key, then the new
    /// owner told to every master, the target first. Returns once every live
    /// node routes the slot to `to`.
    pub fn migrate_slot(&self, key: &str, to: usize) {
        let moving = self.start_migration(key, to);
        self.finish_migration(moving);
    }

    /// The first half of [`RedisCluster::migrate_slot`]: the slot of `key`
    /// marked IMPORTING on `to` and MIGRATING on its master, its keys left
    /// where they are (a reshard moving other keys of the slot).
    pub fn start_migration(&self, key: &str, to: usize) -> Migration {
        let from = self.master_of(key);
        assert_ne!(from, to, "the slot of {key} is served by node {to} already");
        let moving = Migration {
            key: key.to_owned(),
            slot: self.nodes[to].keyslot(key),
            from,
            to,
            from_id: self.node_id(from),
            to_id: self.node_id(to),
        };
        self.setslot(&moving, to, "IMPORTING", &moving.from_id);
        self.setslot(&moving, from, "MIGRATING", &moving.to_id);
        moving
    }

    /// The second half: every key of the slot migrated, then its new owner
    /// told to every master.
    pub fn finish_migration(&self, moving: Migration) {
        let Migration { slot, from, to, .. } = moving;
        loop {
            let keys: Vec<String> = redis::cmd("CLUSTER")
                .arg("GETKEYSINSLOT")
                .arg(slot)
                .arg(100)
                .query(&mut self.nodes[from].conn())
                .unwrap();
            if keys.is_empty() {
                break;
            }
            let _: () = redis::cmd("MIGRATE")
                .arg("127.0.0.1")
                .arg(self.nodes[to].port)
                .arg("")
                .arg(0)
                .arg(5000)
                .arg("KEYS")
                .arg(&keys)
                .query(&mut self.nodes[from].conn())
                .unwrap();
        }
        self.setslot(&moving, to, "NODE", &moving.to_id);
        self.setslot(&moving, from, "NODE", &moving.to_id);
        for i in 0..self.nodes.len() {
            if i != to && i != from && self.nodes[i].is_running() && self.is_master(i) {
                self.setslot(&moving, i, "NODE", &moving.to_id);
            }
        }
        wait_until(
            Duration::from_secs(30),
            "the slot's new owner known",
            || self.master_of(&moving.key) == to,
        );
        self.wait_healthy();
    }

    fn setslot(&self, moving: &Migration, node: usize, how: &str, id: &str) {
        let _: () = redis::cmd("CLUSTER")
            .arg("SETSLOT")
            .arg(moving.slot)
            .arg(how)
            .arg(id)
            .query(&mut self.nodes[node].conn())
            .unwrap();
    }

    fn is_master(&self, i: usize) -> bool {
        self.nodes[i].info("replication").contains("role:master")
    }

    /// Promotes a replica of the master serving `key` with `CLUSTER
    /// FAILOVER` (a caught-up replica, the old master kept running as its
    /// replica); returns the new master once every node routes to it.
    pub fn fail_over_gracefully(&self, key: &str) -> usize {
        let old = self.master_of(key);
        let old_id = self.node_id(old);
        let replica = (0..self.nodes.len())
            .find(|&i| {
                i != old
                    && self.nodes[i].is_running()
                    && self.nodes[i]
                        .info("replication")
                        .contains("master_link_status:up")
                    && redis::cmd("CLUSTER")
                        .arg("NODES")
                        .query::<String>(&mut self.nodes[i].conn())
                        .unwrap()
                        .lines()
                        .any(|l| l.contains("myself") && l.contains(&old_id))
            })
            .expect("a replica of the master serving the key");
        let promoted = || {
            self.master_of(key) == replica
                && self.nodes[old].info("replication").contains("role:slave")
        };
        // Asked again while it has not happened: the masters refuse to vote
        // for a failover of a master soon after an earlier one (twice the
        // node timeout), and the replica then gives up on its own.
        let deadline = Instant::now() + Duration::from_secs(30);
        'asked: loop {
            let _: () = redis::cmd("CLUSTER")
                .arg("FAILOVER")
                .query(&mut self.nodes[replica].conn())
                .unwrap();
            let again = Instant::now() + Duration::from_secs(3);
            while Instant::now() < again {
                if promoted() {
                    break 'asked;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            assert!(Instant::now() < deadline, "the replica was never promoted");
        }
        self.wait_healthy();
        replica
    }
}

/// A slot half moved: see [`RedisCluster::start_migration`].
pub struct Migration {
    key: String,
    slot: u16,
    from: usize,
    to: usize,
    from_id: String,
    to_id: String,
}
