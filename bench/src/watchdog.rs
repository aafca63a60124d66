//! S4, watchdog scale: one client takes `LOCKS` locks with a `TTL_MS` lease
//! and holds them for `SECS` seconds while its renewal loop keeps them alive.
//! Prints one JSON object: the hold window (monotonic ns, for the proxy's
//! round-trip log), locks lost during and at the end, failed releases, and the
//! process' CPU time over the window.

use std::time::Duration;

use futures_util::future::join_all;
use futures_util::stream::{FuturesUnordered, StreamExt};
use rlock_core::{Client, LockOptions, Wait};
use serde_json::json;

use crate::{now_ns, Result};

/// User plus system CPU time of this process, in seconds.
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage fills the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

pub(crate) fn run(runtime: &tokio::runtime::Runtime, args: &[String]) -> Result<()> {
    let url = &args[0];
    let count: usize = args[1].parse()?;
    let ttl = Duration::from_millis(args[2].parse()?);
    let hold = Duration::from_secs(args[3].parse()?);
    let report = runtime.block_on(async move {
        let client = Client::connect(url).await?;
        let options = LockOptions::default().ttl(ttl);
        let locks = (0..count)
            .map(|i| client.lock_with(&format!("s4:{i}"), options.clone()))
            .collect::<rlock_core::Result<Vec<_>>>()?;
        let acquired = join_all(locks.iter().map(|l| l.acquire(Wait::Once))).await;
        let not_acquired = acquired.iter().filter(|r| r.is_err()).count();

        let window_start = now_ns();
        let cpu_start = cpu_seconds();
        // Loss notices cost nothing while none comes (no polling to skew the CPU figure).
        let mut notices: FuturesUnordered<_> = locks.iter().map(|l| l.lost_signal()).collect();
        let mut lost_during = 0;
        let _ = tokio::time::timeout(hold, async {
            while let Some(notice) = notices.next().await {
                lost_during += usize::from(notice.is_some());
            }
            std::future::pending::<()>().await
        })
        .await;
        let cpu = cpu_seconds() - cpu_start;
        let window_end = now_ns();

        let lost_at_end = locks.iter().filter(|l| l.lost().is_some()).count();
        let released = join_all(locks.iter().map(|l| l.release())).await;
        let release_failed = released.iter().filter(|r| r.is_err()).count();
        Ok::<_, rlock_core::Error>(json!({
            "locks": count,
            "ttl_ms": ttl.as_millis() as u64,
            "not_acquired": not_acquired,
            "window": [window_start, window_end],
            "cpu_s": cpu,
            "wall_s": (window_end - window_start) as f64 / 1e9,
            "lost_during": lost_during,
            "lost_at_end": lost_at_end,
            "release_failed": release_failed,
        }))
    })?;
    println!("{report}");
    Ok(())
}
