//! What a sync binding pays for crossing threads: the same uncontended cycle
//! (the core's acquire + release) driven from a plain thread, the way a
//! binding calls the core, over differently built runtimes. Blocks of each
//! way are interleaved; prints the median µs per cycle of each.
//!
//! ```text
//! rlock-bench hops URL ROUNDS CYCLES [ONLY]
//! ```
//!
//! With ONLY, just the ways whose name contains it run (to trace one alone).

use std::future::Future;
use std::time::{Duration, Instant};

use rlock_core::{Client, Lock, Wait};
use serde_json::json;

use crate::Result;

/// How a way calls into its runtime.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Plain,
    /// Each acquire wrapped in a timer (a binding waking up to look for signals).
    Sliced,
    /// Awake for replies, as the faces' driver runs every call.
    Awake,
}

/// One way of running the core from a calling thread.
struct Way {
    name: &'static str,
    runtime: tokio::runtime::Runtime,
    mode: Mode,
    lock: Option<Lock>,
    /// The bare two-command cycle over redis-rs instead of the core (the floor).
    floor: Option<(redis::aio::ConnectionManager, String)>,
    skip: bool,
}

impl Way {
    fn new(name: &'static str, runtime: tokio::runtime::Runtime, mode: Mode) -> Self {
        Way {
            name,
            runtime,
            mode,
            lock: None,
            floor: None,
            skip: false,
        }
    }

    fn run<F: Future>(&self, fut: F) -> F::Output {
        if self.mode == Mode::Awake {
            return self
                .runtime
                .block_on(rlock_core::spin::awake_for_replies(fut));
        }
        self.runtime.block_on(fut)
    }

    fn cycle(&self) -> Result<()> {
        if let Some((conn, sha)) = &self.floor {
            let conn = conn.clone();
            return match self.mode {
                Mode::Awake => {
                    self.run(crate::worker::floor_cycle_counted(conn, sha, "hops:floor"))
                }
                _ => self.run(crate::worker::floor_cycle(conn, sha, "hops:floor")),
            };
        }
        let lock = self.lock.as_ref().ok_or("not connected")?;
        if self.mode == Mode::Sliced {
            self.run(async {
                tokio::time::timeout(Duration::from_millis(50), lock.acquire(Wait::Forever)).await
            })??;
        } else {
            self.run(lock.acquire(Wait::Forever))?;
        }
        self.run(lock.release())?;
        Ok(())
    }
}

fn multi(workers: usize) -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
}

fn current() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}

/// Wakes the runtime-holding thread when dropped.
struct Release<'a>(&'a tokio::sync::Notify);

impl Drop for Release<'_> {
    fn drop(&mut self) {
        self.0.notify_one();
    }
}

pub(crate) fn run(args: &[String]) -> Result<()> {
    let url = &args[0];
    let rounds: usize = args[1].parse()?;
    let cycles: usize = args[2].parse()?;
    let mut ways = [
        Way::new(
            "multi-thread, 2 workers, timer per acquire",
            multi(2)?,
            Mode::Sliced,
        ),
        Way::new("multi-thread, 2 workers", multi(2)?, Mode::Plain),
        Way::new("multi-thread, 1 worker", multi(1)?, Mode::Plain),
        Way::new("current-thread, caller drives", current()?, Mode::Plain),
        Way::new(
            "current-thread, another thread drives",
            current()?,
            Mode::Plain,
        ),
        Way::new(
            "current-thread, caller drives, awake for replies (as the faces do)",
            current()?,
            Mode::Awake,
        ),
        Way::new(
            "redis-rs bare cycle (no core), the caller drives a current-thread runtime",
            current()?,
            Mode::Plain,
        ),
        Way::new(
            "redis-rs bare cycle (no core), the caller drives, awake for replies",
            current()?,
            Mode::Awake,
        ),
    ];
    if let Some(only) = args.get(3) {
        for way in &mut ways {
            way.skip = !way.name.contains(only.as_str());
        }
    }
    let bare = ways.len() - 2;
    for (i, way) in ways.iter_mut().enumerate() {
        if i >= bare {
            way.floor = Some(way.run(crate::worker::floor_connection(url))?);
        } else {
            let client = way.run(Client::connect(url))?;
            way.lock = Some(client.lock(&format!("hops:{i}"))?);
        }
    }
    let mut medians: Vec<Vec<f64>> = vec![Vec::new(); ways.len()];
    let stop = tokio::sync::Notify::new();
    std::thread::scope(|scope| -> Result<()> {
        // The last way: a thread holds that runtime's core meanwhile, so each
        // call is polled by the caller while that thread does the I/O.
        let (holder, stop) = (&ways[4], &stop);
        scope.spawn(move || holder.runtime.block_on(stop.notified()));
        std::thread::sleep(Duration::from_millis(50));
        // Lets that thread go however the measuring ends (a panic included),
        // or the scope would wait for it forever.
        let _release = Release(stop);
        (|| {
            for _ in 0..rounds {
                for (i, way) in ways.iter().enumerate() {
                    if way.skip {
                        continue;
                    }
                    way.cycle()?;
                    let mut lat = Vec::with_capacity(cycles);
                    for _ in 0..cycles {
                        let t = Instant::now();
                        way.cycle()?;
                        lat.push(t.elapsed().as_secs_f64() * 1e6);
                    }
                    lat.sort_by(f64::total_cmp);
                    medians[i].push(lat[lat.len() / 2]);
                }
            }
            Ok(())
        })()
    })?;
    for (way, m) in ways.iter().zip(&mut medians) {
        if way.skip {
            continue;
        }
        m.sort_by(f64::total_cmp);
        println!(
            "{}",
            json!({ "way": way.name, "median_us": m[m.len() / 2], "rounds": m })
        );
    }
    Ok(())
}
