//! Counters and events as JSON, the shape the Python and Node faces hand
//! their callers (`client.stats()`, the Node client's events).

use serde_json::{json, Map, Value};

use super::metrics::{Stats, Timings, BUCKETS};
use super::Event;

impl Stats {
    /// Every counter by its field name, `lost` by reason code, and `wait`
    /// and `hold` as `{count, sum_ms, buckets: [[le_seconds, cumulative]…]}`
    /// (the last bound `null`: +Inf).
    pub fn to_json(&self) -> Value {
        let lost: Map<String, Value> = self
            .lost
            .iter()
            .map(|(reason, n)| (reason.code().to_owned(), json!(n)))
            .collect();
        json!({
            "acquisitions": self.acquisitions,
            "contended_acquisitions": self.contended_acquisitions,
            "timeouts": self.timeouts,
            "releases": self.releases,
            "renewals": self.renewals,
            "renewal_round_trips": self.renewal_round_trips,
            "renewal_failures": self.renewal_failures,
            "lost": lost,
            "reconnects": self.reconnects,
            "wait": timings(&self.wait),
            "hold": timings(&self.hold),
        })
    }
}

fn timings(t: &Timings) -> Value {
    let bounds = BUCKETS.iter().map(|b| json!(b)).chain([Value::Null]);
    let buckets: Vec<Value> = bounds
        .zip(t.cumulative)
        .map(|(le, n)| json!([le, n]))
        .collect();
    json!({
        "count": t.count,
        "sum_ms": t.sum.as_secs_f64() * 1000.0,
        "buckets": buckets,
    })
}

impl Event {
    /// The event's kind as the Node face names it.
    pub fn kind(&self) -> &'static str {
        match self {
            Event::Lost { .. } => "lost",
            Event::RenewalFailed { .. } => "renewalFailed",
            Event::Reconnect { .. } => "reconnect",
            Event::Error { .. } => "error",
        }
    }

    /// `{name, reason, fence}`, `{name}`, `{server}` or `{message}`.
    pub fn to_json(&self) -> Value {
        match self {
            Event::Lost {
                name,
                reason,
                fence,
            } => json!({"name": name, "reason": reason.code(), "fence": fence}),
            Event::RenewalFailed { name } => json!({ "name": name }),
            Event::Reconnect { server } => json!({ "server": server }),
            Event::Error { message } => json!({ "message": message }),
        }
    }
}
