//! A Sentinel group on loopback: a primary, its replica and three sentinels
//! watching them, all stopped when dropped.

use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::Duration;

use crate::server::{fresh_dir, server_command};
use crate::{free_port, wait_until, RedisServer};

pub struct SentinelGroup {
    pub primary: RedisServer,
    pub replica: RedisServer,
    sentinels: Vec<(u16, Child, PathBuf)>,
}

impl SentinelGroup {
    pub const SERVICE: &'static str = "rlockmaster";

    pub fn start() -> Self {
        let primary = RedisServer::start();
        let replica =
            RedisServer::start_with(&["--replicaof", "127.0.0.1", &primary.port.to_string()]);
        wait_until(Duration::from_secs(20), "replica in sync", || {
            replica
                .info("replication")
                .contains("master_link_status:up")
        });
        let sentinels = (0..3)
            .map(|_| {
                let port = free_port();
                let dir = fresh_dir("rlock-sentinel");
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
                let child = server_command()
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
