//! The one place that builds the Redis keys of a lock (see the wire protocol in
//! the README). The braces put every key of one lock in one Cluster slot.

/// The keys and channels of one lock name under one prefix.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Keys {
    /// `P:{NAME}`: the hash holding owner, count and fence; its PEXPIRE is the lease.
    pub lock: String,
    /// `P:{NAME}:fence`: the fencing counter, INCR per fresh acquisition.
    pub fence: String,
    /// `P:{NAME}:released`: the pub/sub channel announcing full releases.
    pub channel: String,
    /// `P:{NAME}:queue`: fair mode's waiting line (owner ids in arrival order).
    pub queue: String,
    /// `P:{NAME}:leases`: the lease each waiter in line asked for.
    pub leases: String,
    /// `P:{NAME}:w:`: prefix of the waiter channels, one per client id; a fair
    /// waiter is alive while its client is subscribed to its channel.
    pub waiter_prefix: String,
}

impl Keys {
    /// Builds the keys; `name` and `prefix` must already be validated.
    pub fn new(prefix: &str, name: &str) -> Self {
        let lock = format!("{prefix}:{{{name}}}");
        Keys {
            fence: format!("{lock}:fence"),
            channel: format!("{lock}:released"),
            queue: format!("{lock}:queue"),
            leases: format!("{lock}:leases"),
            waiter_prefix: format!("{lock}:w:"),
            lock,
        }
    }

    /// The waiter channel of one client.
    pub fn waiter_channel(&self, client_id: &str) -> String {
        format!("{}{client_id}", self.waiter_prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_follow_the_wire_protocol() {
        let k = Keys::new("rlock", "product:1001");
        assert_eq!(k.lock, "rlock:{product:1001}");
        assert_eq!(k.fence, "rlock:{product:1001}:fence");
        assert_eq!(k.channel, "rlock:{product:1001}:released");
        assert_eq!(k.queue, "rlock:{product:1001}:queue");
        assert_eq!(k.leases, "rlock:{product:1001}:leases");
        assert_eq!(k.waiter_channel("c1"), "rlock:{product:1001}:w:c1");
    }
}
