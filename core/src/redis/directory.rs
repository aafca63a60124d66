//! What inspection reads beyond one lock's keys: the clients' registrations
//! (`core/lua/client/register.lua`), and the lock keys under a prefix, listed with SCAN
//! (bounded steps, never KEYS) on every master.

use std::collections::HashMap;

use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{RedisResult, Value};

use super::deployment::Deployment;
use super::endpoint::{Conn, Member};
use super::scripts::REGISTER;
use crate::error::{Error, Result};

/// What a registration key holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Found {
    Absent,
    /// Someone else's data (another type, or another client's id).
    Foreign,
    Fields(HashMap<String, String>),
}

/// Where one SCAN goes: a server, or one master of a Cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ScanTarget {
    member: usize,
    /// A Cluster master's host and port; `None`: the member itself.
    address: Option<(String, u16)>,
}

impl Member {
    async fn registration(&self, key: &str, id: &str) -> RedisResult<Found> {
        let mut conn = self.conn().await?;
        let reply: RedisResult<HashMap<String, String>> =
            redis::cmd("HGETALL").arg(key).query_async(&mut conn).await;
        match reply {
            Ok(fields) if fields.is_empty() => Ok(Found::Absent),
            Ok(fields) if fields.get("id").map(String::as_str) == Some(id) => {
                Ok(Found::Fields(fields))
            }
            Ok(_) => Ok(Found::Foreign),
            Err(e) if e.code() == Some("WRONGTYPE") => Ok(Found::Foreign),
            Err(e) => {
                self.failed(&e);
                Err(e)
            }
        }
    }

    /// The masters of a Cluster (from `CLUSTER NODES`), or this server.
    async fn scan_targets(&self, member: usize) -> RedisResult<Vec<ScanTarget>> {
        let mut conn = self.conn().await?;
        let Conn::Cluster(cluster) = &mut conn else {
            return Ok(vec![ScanTarget {
                member,
                address: None,
            }]);
        };
        let text: String = redis::cmd("CLUSTER")
            .arg("NODES")
            .query_async(cluster)
            .await?;
        Ok(text
            .lines()
            .filter_map(|line| {
                let mut fields = line.split(' ');
                let address = fields.nth(1)?;
                let flags = fields.next()?;
                let is_master = flags.split(',').any(|f| f == "master");
                let failing = flags.split(',').any(|f| f == "fail" || f == "noaddr");
                if !is_master || failing {
                    return None;
                }
                // host:port@cport[,hostname]
                let host_port = address.split('@').next()?;
                let (host, port) = host_port.rsplit_once(':')?;
                Some(ScanTarget {
                    member,
                    address: Some((host.to_owned(), port.parse().ok()?)),
                })
            })
            .collect())
    }

    /// One SCAN step of `target`: the next cursor (0: done) and the hash
    /// keys matching `pattern`.
    async fn scan(
        &self,
        target: &ScanTarget,
        cursor: u64,
        pattern: &str,
        count: usize,
    ) -> RedisResult<(u64, Vec<String>)> {
        let mut cmd = redis::cmd("SCAN");
        cmd.arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(count)
            .arg("TYPE")
            .arg("hash");
        let mut conn = self.conn().await?;
        let reply: RedisResult<(u64, Vec<String>)> = match (&mut conn, &target.address) {
            (Conn::Cluster(cluster), Some((host, port))) => {
                let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress {
                    host: host.clone(),
                    port: *port,
                });
                let value: RedisResult<Value> = cluster.route_command(cmd, routing).await;
                value.and_then(|v| redis::from_redis_value(v).map_err(Into::into))
            }
            _ => cmd.query_async(&mut conn).await,
        };
        if let Err(e) = &reply {
            self.failed(e);
        }
        reply
    }
}

impl Deployment {
    /// Writes or renews a registration on every member (each on its own: a
    /// member down is renewed on the next tick). `Ok(false)` when some member
    /// holds someone else's data there; an error when no member answered.
    pub(crate) async fn register(
        &self,
        key: &str,
        lease_ms: u64,
        id: &str,
        fields: &[(&str, String)],
    ) -> Result<bool> {
        let mut call = REGISTER.call(&[key]).arg(lease_ms).arg(id);
        for (f, v) in fields {
            call = call.arg(*f).arg(v.as_str());
        }
        let call = &call;
        let replies = futures_util::future::join_all(
            self.members()
                .iter()
                .map(|n| async move { n.call::<i64>(call).await.map(|w| w == 1) }),
        )
        .await;
        let mut errors = Vec::new();
        let mut ours = true;
        let mut answered = false;
        for (member, reply) in self.members().iter().zip(replies) {
            match reply {
                Ok(written) => {
                    answered = true;
                    ours &= written;
                }
                Err(e) => errors.push(self.error(member, &e).to_string()),
            }
        }
        match answered {
            true => Ok(ours),
            false => Err(Error::Connection(errors.join("; "))),
        }
    }

    /// A client's registration: from the first member that has it.
    pub(crate) async fn registration(&self, key: &str, id: &str) -> Result<Found> {
        let mut last = Err(Error::Connection("no node".to_owned()));
        for member in self.members() {
            match member.registration(key, id).await {
                Ok(Found::Absent) => last = Ok(Found::Absent),
                Ok(found) => return Ok(found),
                Err(e) => {
                    if last.is_err() {
                        last = Err(self.error(member, &e));
                    }
                }
            }
        }
        last
    }

    /// Every place a listing scans.
    pub(crate) async fn scan_targets(&self) -> Result<Vec<ScanTarget>> {
        let mut all = Vec::new();
        for (i, member) in self.members().iter().enumerate() {
            all.extend(
                member
                    .scan_targets(i)
                    .await
                    .map_err(|e| self.error(member, &e))?,
            );
        }
        Ok(all)
    }

    pub(crate) async fn scan(
        &self,
        target: &ScanTarget,
        cursor: u64,
        pattern: &str,
        count: usize,
    ) -> Result<(u64, Vec<String>)> {
        let member = &self.members()[target.member];
        member
            .scan(target, cursor, pattern, count)
            .await
            .map_err(|e| self.error(member, &e))
    }
}
