//! The Rust side of the redis-rlock benchmark, driven by `bench/harness/` (`python -m harness`)
//! (run it all with `make bench`):
//!
//! ```text
//! rlock-bench worker URL...                    the workers of S1, S2, S7, S8, S9 and the idle waiters (JSON lines)
//! rlock-bench cached-worker URL                the worker of S10, `cached` (JSON lines)
//! rlock-bench watchdog URL LOCKS TTL_MS SECS   S4: one client holds LOCKS locks for SECS seconds
//! rlock-bench proxy HOST:PORT                  forwards to Redis and counts round trips
//! rlock-bench hops URL ROUNDS CYCLES           the cycle from a plain thread over several runtimes
//! rlock-bench counting ROUNDS CYCLES           what the client's counters cost a cycle
//! ```
//!
//! Timestamps are CLOCK_MONOTONIC nanoseconds, the clock the Python
//! (`time.monotonic_ns`) and Node (`process.hrtime.bigint`) workers read, so
//! the harness can order events of processes in three languages.

// The core's cache future inside each reader's task (cached.rs) is deeper
// than the compiler's default limit for laying it out and proving it Send.
#![recursion_limit = "256"]

mod cached;
mod counting;
mod hops;
mod proxy;
mod watchdog;
mod worker;

use std::process::ExitCode;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// CLOCK_MONOTONIC in nanoseconds.
pub(crate) fn now_ns() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("rlock-bench: no runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = match args.first().map(String::as_str) {
        Some("worker") if args.len() > 1 => worker::run(&runtime, &args[1..]),
        Some("cached-worker") if args.len() == 2 => cached::run(&runtime, &args[1]),
        Some("watchdog") if args.len() == 5 => watchdog::run(&runtime, &args[1..]),
        Some("proxy") if args.len() == 2 => proxy::run(&runtime, &args[1]),
        Some("hops") if (4..=5).contains(&args.len()) => hops::run(&args[1..]),
        Some("counting") if args.len() == 3 => counting::run(&args[1..]),
        _ => Err(
            "usage: rlock-bench worker URL... | cached-worker URL | watchdog URL LOCKS TTL_MS SECS | proxy HOST:PORT | hops URL ROUNDS CYCLES | counting ROUNDS CYCLES"
                .into(),
        ),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rlock-bench: {e}");
            ExitCode::FAILURE
        }
    }
}
