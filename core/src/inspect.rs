//! Who holds a lock and who waits for it: one lock's state joined with the
//! registrations of the clients its owner ids name (`registration.rs`),
//! the held locks under the prefix listed page by page, and the operator's
//! forced release, which goes through the release protocol so that waiters
//! are handed the lock or woken and the holder hears of its loss.

mod json;

use std::collections::HashMap;

use futures_util::stream::{self, StreamExt};

use crate::context::Client;
use crate::error::{Error, NotOwnedReason, Result};
use crate::keys::Keys;
use crate::redis::directory::{Found, ScanTarget};
use crate::redis::endpoint::ReleaseOf;
use crate::redis::scripts::{LockState, ManyHolderState};

/// What a client wrote about itself when it connected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientInfo {
    pub host: String,
    pub pid: Option<u32>,
    /// Its command line, passwords hidden, cut to 256 bytes.
    pub process: String,
    /// The package it came from and its runtime: `python 3.11.4`,
    /// `node v20.11.0`, `cli`, `rust`.
    pub face: String,
    /// The redis-rlock version.
    pub version: String,
    /// When it connected, by Redis' clock (ms since the Unix epoch).
    pub since_ms: Option<u64>,
}

impl ClientInfo {
    /// Whether the client registered from the machine this runs on, so that
    /// its `pid` names a process here (which may have ended since).
    pub fn on_this_host(&self) -> bool {
        self.host == crate::registration::host_name()
    }
}

/// An owner of a holding or a place in line, with its client's registration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    /// The owner id as stored: `<client id>:<unit>`.
    pub owner: String,
    pub client_id: String,
    /// Which thread, task or handle of its client: what follows the client
    /// id in the owner id (Python: `<pid>:t<n>:<thread name>` or
    /// `<pid>:a<n>:<task name>`; Node, Rust and the CLI: `h<n>`).
    pub unit: String,
    /// Its client's registration; `None` when it has none (it ended, or
    /// an earlier build made it).
    pub client: Option<ClientInfo>,
    /// A mutex waiter's time in line so far, by Redis' clock (`None` for a
    /// holder, a waiter of an earlier build, and the holders of a
    /// read-write lock or semaphore).
    pub waited: Option<std::time::Duration>,
}

/// A lock as inspection sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Inspection {
    pub name: String,
    pub state: LockState,
    /// The holder, when held through this protocol.
    pub holder: Option<Owner>,
    /// The first waiters in line, from its head (see
    /// [`LINE_SHOWN`](crate::LINE_SHOWN)).
    pub waiters: Vec<Owner>,
    /// The read-write lock of the name, when anyone holds or waits on it.
    pub rwlock: Option<ManyHolderInspection>,
    /// The semaphore of the name, when anyone holds or waits on it.
    pub semaphore: Option<ManyHolderInspection>,
}

/// A read-write lock or a semaphore as inspection sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct ManyHolderInspection {
    pub state: ManyHolderState,
    /// Who owns each of `state.holders`, in its order.
    pub holders: Vec<Owner>,
}

/// `state` when anyone holds or waits on it (or a key of another type is
/// in its place).
fn busy(state: ManyHolderState) -> Option<ManyHolderState> {
    (!state.holders.is_empty() || state.waiting > 0 || state.foreign).then_some(state)
}

/// One held lock of a listing.
#[derive(Debug, Clone, PartialEq)]
pub struct Listed {
    pub name: String,
    pub state: LockState,
}

/// How many keys one SCAN step looks at: enough to page through thousands of
/// locks in few round trips, small enough that Redis serves others between
/// steps.
pub const SCAN_COUNT: usize = 1000;
/// How many locks of a page are read at once.
const READ_AT_ONCE: usize = 64;

/// A listing of the held locks under the prefix, read page by page.
pub struct Listing {
    client: Client,
    pattern: String,
    targets: Vec<ScanTarget>,
    cursor: u64,
    started: bool,
}

impl Listing {
    /// The next page of held locks (possibly empty while the scan goes on);
    /// `None` once every master was scanned. SCAN may name a key twice
    /// (a rehash meanwhile): a caller that must not see one twice keeps
    /// the names it saw.
    pub async fn next_page(&mut self) -> Result<Option<Vec<Listed>>> {
        let deployment = self.client.context.deployment.current()?;
        if !self.started {
            self.targets = deployment.scan_targets().await?;
            self.targets.reverse();
            self.started = true;
        }
        let Some(target) = self.targets.last().cloned() else {
            return Ok(None);
        };
        let (next, keys) = deployment
            .scan(&target, self.cursor, &self.pattern, SCAN_COUNT)
            .await?;
        self.cursor = next;
        if next == 0 {
            self.targets.pop();
        }
        let prefix = format!("{}:{{", self.client.context.prefix);
        let names: Vec<String> = keys
            .into_iter()
            .filter_map(|k| Some(k.strip_prefix(&prefix)?.strip_suffix('}')?.to_owned()))
            .collect();
        let client = &self.client;
        let states: Vec<Result<Listed>> = stream::iter(names)
            .map(|name| async move {
                let keys = Keys::new(&client.context.prefix, &name);
                let state = client.context.deployment.inspect(&keys).await?;
                Ok(Listed { name, state })
            })
            .buffered(READ_AT_ONCE)
            .collect()
            .await;
        let mut page = Vec::new();
        for s in states {
            let s = s?;
            if s.state.held {
                page.push(s);
            }
        }
        Ok(Some(page))
    }
}

/// The SCAN pattern of the lock keys whose names match the glob `pattern`;
/// refused when it could match keys outside `P:{…}`.
fn scan_pattern(prefix: &str, pattern: &str) -> Result<String> {
    if pattern.is_empty() {
        return Err(Error::invalid("the name pattern must not be empty"));
    }
    if pattern.len() > crate::options::MAX_NAME_BYTES {
        return Err(Error::invalid(format!(
            "the name pattern must be at most {} bytes",
            crate::options::MAX_NAME_BYTES
        )));
    }
    // A trailing backslash would escape the closing brace of `P:{…}`.
    let trailing = pattern.chars().rev().take_while(|c| *c == '\\').count();
    if trailing % 2 == 1 {
        return Err(Error::invalid(
            "the name pattern ends with a lone backslash, which would escape the key's closing brace",
        ));
    }
    // The prefix is matched as it is written: its glob characters escaped.
    let mut literal = String::new();
    for c in prefix.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            literal.push('\\');
        }
        literal.push(c);
    }
    Ok(format!("{literal}:{{{pattern}}}"))
}

/// What the owner id `owner` says of its holder.
fn owner_of(owner: &str, registrations: &HashMap<String, Option<ClientInfo>>) -> Owner {
    let (client_id, unit) = owner.split_once(':').unwrap_or((owner, ""));
    Owner {
        owner: owner.to_owned(),
        client_id: client_id.to_owned(),
        unit: unit.to_owned(),
        client: registrations.get(client_id).cloned().flatten(),
        waited: None,
    }
}

fn client_info(fields: &HashMap<String, String>) -> ClientInfo {
    let text = |k: &str| fields.get(k).cloned().unwrap_or_default();
    ClientInfo {
        host: text("host"),
        pid: fields.get("pid").and_then(|p| p.parse().ok()),
        process: text("process"),
        face: text("face"),
        version: text("version"),
        since_ms: fields.get("since").and_then(|s| s.parse().ok()),
    }
}

impl Client {
    /// Who holds the mutex `name` and who waits in its line, and who holds
    /// the read-write lock and the semaphore of that name (when anyone holds
    /// or waits on them; not on a Redlock, which has neither), each with
    /// what its client registered (host, pid, command line).
    pub async fn inspect(&self, name: &str) -> Result<Inspection> {
        crate::options::name(name)?;
        let keys = Keys::new(&self.context.prefix, name);
        let deployment = self.context.deployment.current()?;
        let state = deployment.inspect(&keys).await?;
        let (rwlock, semaphore) = if self.is_redlock() {
            (None, None)
        } else {
            let defaults = crate::options::LockOptions::default;
            let rw = self.rw_lock(name, defaults())?.state().await?;
            // The size given here is not checked against the stored one:
            // nothing is acquired.
            let sem = self.semaphore(name, 1, defaults())?.state().await?;
            (busy(rw), busy(sem))
        };
        let many_holder_owners = rwlock
            .iter()
            .chain(&semaphore)
            .flat_map(|s| s.holders.iter().map(|h| h.owner.as_str()));
        let mut ids: Vec<String> = state
            .owner
            .iter()
            .chain(&state.line)
            .map(String::as_str)
            .chain(many_holder_owners)
            .map(|o| o.split(':').next().unwrap_or(o).to_owned())
            .collect();
        ids.sort_unstable();
        ids.dedup();
        // Each read owns what it needs: a future borrowing from here would
        // not be Send for every lifetime, which the faces' runtimes ask.
        let reads = ids.into_iter().map(|id| {
            let key = crate::keys::client_key(&self.context.prefix, &id);
            let deployment = deployment.clone();
            async move {
                // A registration that cannot be read (a node down, an ACL
                // without HGETALL) leaves that owner unnamed, not the lock
                // uninspected.
                let info = match deployment.registration(&key, &id).await {
                    Ok(Found::Fields(f)) => Some(client_info(&f)),
                    Ok(Found::Absent | Found::Foreign) | Err(_) => None,
                };
                (id, info)
            }
        });
        let registrations: HashMap<String, Option<ClientInfo>> =
            futures_util::future::join_all(reads)
                .await
                .into_iter()
                .collect();
        let inspected = |s: ManyHolderState| ManyHolderInspection {
            holders: s
                .holders
                .iter()
                .map(|h| owner_of(&h.owner, &registrations))
                .collect(),
            state: s,
        };
        Ok(Inspection {
            name: name.to_owned(),
            holder: state.owner.as_deref().map(|o| owner_of(o, &registrations)),
            waiters: state
                .line
                .iter()
                .zip(&state.line_waited)
                .map(|(o, waited)| Owner {
                    waited: *waited,
                    ..owner_of(o, &registrations)
                })
                .collect(),
            rwlock: rwlock.map(inspected),
            semaphore: semaphore.map(inspected),
            state,
        })
    }

    /// The held mutexes under this client's prefix whose names match the
    /// glob `pattern` (`*`: all), read with SCAN on every master, a bounded
    /// step at a time. Checked before any I/O.
    pub fn list(&self, pattern: &str) -> Result<Listing> {
        Ok(Listing {
            client: self.clone(),
            pattern: scan_pattern(&self.context.prefix, pattern)?,
            targets: Vec::new(),
            cursor: 0,
            started: false,
        })
    }

    /// Frees the mutex `name` whoever holds it, as its holder's last
    /// release would (see [`Client::force_unlock_seen`]). Returns what was
    /// released (`None`: it was free, or not held through this protocol,
    /// or its holder let it go meanwhile).
    pub async fn force_unlock(&self, name: &str) -> Result<Option<Inspection>> {
        let seen = self.inspect(name).await?;
        Ok(self.force_unlock_seen(&seen).await?.then_some(seen))
    }

    /// Frees the holding `seen` shows (an inspection an operator confirmed),
    /// as its holder's last release would: the first live waiter in line is
    /// handed it, or every waiter is told it is free; the holder's own
    /// release is refused and it learns of the loss at its next renewal.
    /// Only that holding is released: one taken meanwhile, even by the same
    /// owner, is left alone. Whether it was released (by this call, or by
    /// its first send when it is sent again). A Redlock refuses it: its
    /// masters count tokens apart, so a holding cannot be named on all.
    pub async fn force_unlock_seen(&self, seen: &Inspection) -> Result<bool> {
        if self.is_redlock() {
            return Err(Error::invalid(
                "a forced unlock names the holding by its fencing token, which Redlock masters \
                 count apart: free it on each master, or wait for its lease to end",
            ));
        }
        let (Some(owner), Some(fence)) = (seen.state.owner.as_deref(), seen.state.fence) else {
            return Ok(false);
        };
        let keys = Keys::new(&self.context.prefix, &seen.name);
        let lease_ms = seen.state.ttl_ms.unwrap_or(1).max(1);
        // As the holder's last acquisition, of that holding only, marked as
        // forced: sent again after a lost reply, release.lua answers it as
        // done, and the holder's own release is refused.
        let of = ReleaseOf {
            before: 1,
            fence,
            forced: true,
            ..ReleaseOf::ANY
        };
        let deployment = self.context.deployment.current()?;
        // Refused: that holding ended meanwhile (or another took its place).
        let released: std::result::Result<u32, NotOwnedReason> =
            deployment.release(&keys, owner, lease_ms, of).await?;
        Ok(released.is_ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scan_pattern_stays_under_the_prefix() {
        assert_eq!(scan_pattern("rlock", "*").unwrap(), "rlock:{*}");
        assert_eq!(scan_pattern("a*b", "job:?").unwrap(), "a\\*b:{job:?}");
        assert!(scan_pattern("rlock", "").is_err());
        assert!(scan_pattern("rlock", "x\\").is_err());
        assert_eq!(scan_pattern("rlock", "x\\\\").unwrap(), "rlock:{x\\\\}");
    }
}
