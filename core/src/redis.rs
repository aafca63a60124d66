//! Talking to Redis: the deployment a client locks on (one server, a Sentinel
//! group, a Cluster, or several masters decided by majority: Redlock), one
//! endpoint of it with its connections, and the Lua scripts every request runs
//! with their replies. Nothing here knows of waits or holdings: a request goes
//! out, and its answer comes back as the lock code needs it.

pub(crate) mod cached;
pub(crate) mod deployment;
pub(crate) mod directory;
pub(crate) mod endpoint;
pub(crate) mod scripts;
