//! What the Rust tests share: a real `redis-server` on a free loopback port,
//! stopped when dropped (the one place they start Redis), the deployments
//! built from it, a proxy that injects network faults, and waits that end at
//! a deadline.

mod certificates;
mod cluster;
mod contend;
mod inspect;
mod masters;
mod monitor;
mod port;
mod proxy;
mod sentinel;
mod server;
mod wait;
mod worker;

pub use cluster::{Migration, RedisCluster};
pub use contend::contend;
pub use masters::Masters;
pub use monitor::Monitor;
pub use port::free_port;
pub use proxy::{behind_proxy, script, Cut, FaultProxy};
pub use sentinel::SentinelGroup;
pub use server::RedisServer;
pub use wait::{eventually, finished, in_line, until, until_in_line, wait_until};
pub use worker::{worker_args, worker_command, worker_process};

// A Rust sample of the README that stops compiling fails `cargo test --doc`
// (`cargo test --workspace` runs it), as a stale sample would mislead its
// reader. Compiled here, not in rlock-core, whose package carries no file
// from outside the crate.
#[cfg(doctest)]
#[doc = include_str!("../../../../README.md")]
pub struct ReadmeDocs;
