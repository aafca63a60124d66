//! The one place that builds the Redis keys of a lock (see the wire protocol in
//! the README). The braces put every key of one lock in one Cluster slot.

/// The keys and channel of one lock name under one prefix.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Keys {
    /// `P:{NAME}`: the hash holding owner, count and fence; its PEXPIRE is the lease.
    pub lock: String,
    /// `P:{NAME}:fence`: the fencing counter, INCR per fresh acquisition.
    pub fence: String,
    /// `P:{NAME}:released`: the pub/sub channel announcing full releases.
    pub channel: String,
}

impl Keys {
    /// Builds the keys; `name` and `prefix` must already be validated.
    pub fn new(prefix: &str, name: &str) -> Self {
        let lock = format!("{prefix}:{{{name}}}");
        Keys {
            fence: format!("{lock}:fence"),
            channel: format!("{lock}:released"),
            lock,
        }
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
    }
}
