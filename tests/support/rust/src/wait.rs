//! Waiting on a condition, always with a deadline.

use std::time::{Duration, Instant};

/// Polls `cond` until it holds or `within` passes; for observing state that
/// has no event to wait on (a key's TTL in Redis).
pub async fn eventually(within: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if cond() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    cond()
}

/// Polls `cond` until it holds, failing the test once `within` passes
/// (blocking; for set-up, outside any runtime's tasks).
pub fn wait_until(within: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Awaits `cond` (a question put to Redis, say) until it holds, failing
/// the test once 10 s pass.
pub async fn until<F, Fut>(mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond().await {
        assert!(Instant::now() < deadline, "condition not met in time");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Whether `n` waiters stand in the line of the lock at key `lock` (its
/// `:queue` list) within 5 s, as Redis shows it.
pub async fn in_line(server: &crate::RedisServer, lock: &str, n: usize) -> bool {
    let line = format!("{lock}:queue");
    eventually(Duration::from_secs(5), || {
        redis::Commands::llen::<_, usize>(&mut server.conn(), &line).unwrap() == n
    })
    .await
}

/// Waits until `n` waiters stand in `lock`'s line, as its state reports.
pub async fn until_in_line(lock: &rlock_core::Lock, n: u32) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now = lock.state().await.unwrap().waiting;
        if now == n {
            return;
        }
        assert!(Instant::now() < deadline, "{now} in line, expected {n}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The outcome of a spawned task, which must finish `within`.
pub async fn finished<T>(task: tokio::task::JoinHandle<T>, within: Duration) -> T {
    tokio::time::timeout(within, task)
        .await
        .expect("the task did not finish in time")
        .expect("the task panicked")
}
