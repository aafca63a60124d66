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
use crate::redis::scripts::LockState;

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

/// An owner of a holding or a place in line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Party {
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
}

/// A lock as inspection sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Inspection {
    pub name: String,
    pub state: LockState,
    /// The holder, when held through this protocol.
    pub holder: Option<Party>,
    /// The first waiters in line, from its head (see
    /// [`LINE_SHOWN`](crate::LINE_SHOWN)).
    pub waiters: Vec<Party>,
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
fn party(owner: &str, registrations: &HashMap<String, Option<ClientInfo>>) -> Party {
    let (client_id, unit) = owner.split_once(':').unwrap_or((owner, ""));
    Party {
        owner: owner.to_owned(),
        client_id: client_id.to_owned(),
        unit: unit.to_owned(),
        client: registrations.get(client_id).cloned().flatten(),
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
    /// Who holds the mutex `name` and who waits in its line, with what
    /// their clients registered (host, pid, command line).
    pub async fn inspect(&self, name: &str) -> Result<Inspection> {
        crate::options::name(name)?;
        let keys = Keys::new(&self.context.prefix, name);
        let deployment = self.context.deployment.current()?;
        let state = deployment.inspect(&keys).await?;
        let mut ids: Vec<&str> = state
            .owner
            .iter()
            .chain(&state.line)
            .map(|o| o.split(':').next().unwrap_or(o))
            .collect();
        ids.sort_unstable();
        ids.dedup();
        let mut registrations = HashMap::new();
        for id in ids {
            let found = deployment
                .registration(&crate::keys::client_key(&self.context.prefix, id), id)
                .await?;
            let info = match found {
                Found::Fields(f) => Some(client_info(&f)),
                Found::Absent | Found::Foreign => None,
            };
            registrations.insert(id.to_owned(), info);
        }
        Ok(Inspection {
            name: name.to_owned(),
            holder: state.owner.as_deref().map(|o| party(o, &registrations)),
            waiters: state
                .line
                .iter()
                .map(|o| party(o, &registrations))
                .collect(),
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
    /// release would: the first live waiter in line is handed it, or every
    /// waiter is told it is free; the holder learns of the loss at its next
    /// renewal. Only the holding seen first is released (one taken
    /// meanwhile is left alone). Returns what was released (`None`: it was
    /// free, or not held through this protocol).
    pub async fn force_unlock(&self, name: &str) -> Result<Option<Inspection>> {
        let seen = self.inspect(name).await?;
        let (Some(owner), Some(fence)) = (seen.state.owner.as_deref(), seen.state.fence) else {
            return Ok(None);
        };
        let keys = Keys::new(&self.context.prefix, name);
        let lease_ms = seen.state.ttl_ms.unwrap_or(1).max(1);
        // As the holder's last acquisition, of that holding only: sent again
        // after a lost reply, release.lua answers it as done.
        let of = ReleaseOf {
            before: 1,
            fence,
            last_valid_until: None,
        };
        let deployment = self.context.deployment.current()?;
        // Refused: that holding ended meanwhile (or another took its place).
        let released: std::result::Result<u32, NotOwnedReason> =
            deployment.release(&keys, owner, lease_ms, of).await?;
        Ok(released.ok().map(|_| seen))
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
