//! An inspection as JSON: the one shape the CLI prints with `--json` and the
//! Python and Node faces hand their callers (as a dict, as an object).

use serde_json::{json, Value};

use super::{ClientInfo, Inspection, Listed, ManyHolderInspection, Owner};
use crate::redis::scripts::{Holder, LockState};

impl Inspection {
    /// `{name, held, owner, ttl_ms, count, fence, fence_counter, held_ms,
    /// waiting, holder, waiters, rwlock, semaphore}`; `holder` is `null`
    /// when the lock is free; `rwlock` is `{readers, writer, waiting,
    /// held_by}` and `semaphore` `{permits, used, free, holders, waiting,
    /// held_by}`, each `null` when nobody holds or waits on it, `held_by`
    /// listing each holding as a party with its `mode` (`read` or `write`)
    /// or `permits`, and its `count`, `fence` and `ttl_ms`.
    pub fn to_json(&self) -> Value {
        let mut out = state(&self.name, &self.state);
        out["holder"] = self.holder.as_ref().map_or(Value::Null, Owner::to_json);
        out["waiters"] = self.waiters.iter().map(Owner::to_json).collect();
        out["rwlock"] = self.rwlock.as_ref().map_or(Value::Null, |rw| {
            let s = &rw.state;
            json!({
                "readers": s.holders.iter().filter(|h| !h.writes()).count(),
                "writer": s.holders.iter().any(|h| h.writes()),
                "waiting": s.waiting,
                "held_by": held_by(rw, |h| json!({"mode": if h.writes() { "write" } else { "read" }})),
            })
        });
        out["semaphore"] = self.semaphore.as_ref().map_or(Value::Null, |sem| {
            let s = &sem.state;
            let used = s.used();
            json!({
                "permits": s.size,
                "used": used,
                "free": s.size.map(|n| n.saturating_sub(used)),
                "holders": s.holders.len(),
                "waiting": s.waiting,
                "held_by": held_by(sem, |h| json!({"permits": h.permits})),
            })
        });
        out
    }
}

/// Each holding of `inspected` as its owner, with what `kind` says of it.
fn held_by(inspected: &ManyHolderInspection, kind: impl Fn(&Holder) -> Value) -> Value {
    inspected
        .state
        .holders
        .iter()
        .zip(&inspected.holders)
        .map(|(h, p)| {
            let mut v = p.to_json();
            if let (Value::Object(out), Value::Object(extra)) = (&mut v, kind(h)) {
                out.extend(extra);
                out.insert("count".into(), json!(h.count));
                out.insert("fence".into(), json!(h.fence));
                out.insert("ttl_ms".into(), json!(h.ttl_ms));
            }
            v
        })
        .collect()
}

impl Listed {
    /// `{name, held, owner, ttl_ms, count, fence, fence_counter, held_ms,
    /// waiting}`.
    pub fn to_json(&self) -> Value {
        state(&self.name, &self.state)
    }
}

impl Owner {
    /// `{owner, client_id, unit, client, waited_ms}`; `client` is `null`
    /// when its client left no registration, `waited_ms` `null` for a holder.
    pub fn to_json(&self) -> Value {
        json!({
            "owner": self.owner,
            "client_id": self.client_id,
            "unit": self.unit,
            "client": self.client.as_ref().map(ClientInfo::to_json),
            "waited_ms": self.waited.map(|d| d.as_millis() as u64),
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
