//! An inspection as JSON: the one shape the CLI prints with `--json` and the
//! Python and Node faces hand their callers (as a dict, as an object).

use serde_json::{json, Value};

use super::{ClientInfo, Inspection, Listed, Party};
use crate::redis::scripts::LockState;

impl Inspection {
    /// `{name, held, owner, ttl_ms, count, fence, fence_counter, held_ms,
    /// waiting, holder, waiters}`; `holder` is `null` when the lock is free.
    pub fn to_json(&self) -> Value {
        let mut out = state(&self.name, &self.state);
        out["holder"] = self.holder.as_ref().map_or(Value::Null, Party::to_json);
        out["waiters"] = self.waiters.iter().map(Party::to_json).collect();
        out
    }
}

impl Listed {
    /// `{name, held, owner, ttl_ms, count, fence, fence_counter, held_ms,
    /// waiting}`.
    pub fn to_json(&self) -> Value {
        state(&self.name, &self.state)
    }
}

impl Party {
    /// `{owner, client_id, unit, client}`; `client` is `null` when its
    /// client left no registration.
    pub fn to_json(&self) -> Value {
        json!({
            "owner": self.owner,
            "client_id": self.client_id,
            "unit": self.unit,
            "client": self.client.as_ref().map(ClientInfo::to_json),
        })
    }
}

impl ClientInfo {
    /// `{host, pid, process, face, version, since_ms}`.
    pub fn to_json(&self) -> Value {
        json!({
            "host": self.host,
            "pid": self.pid,
            "process": self.process,
            "face": self.face,
            "version": self.version,
            "since_ms": self.since_ms,
        })
    }
}

fn state(name: &str, s: &LockState) -> Value {
    json!({
        "name": name,
        "held": s.held,
        "owner": s.owner,
        "ttl_ms": s.ttl_ms,
        "count": s.count,
        "fence": s.fence,
        "fence_counter": s.fence_counter,
        "held_ms": s.held_for.map(|d| d.as_millis() as u64),
        "waiting": s.waiting,
    })
}
