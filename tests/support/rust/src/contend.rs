//! Mutual exclusion made visible: a counter that only the lock keeps exact.

use rlock_core::{Lock, Wait};

/// Runs every lock in `locks` concurrently, each taking its lock `rounds`
/// times and incrementing a counter on `data` with GET then SET inside it:
/// not atomic, so only mutual exclusion keeps the count exact. Returns it.
pub async fn contend(locks: Vec<Lock>, rounds: usize, data: &str) -> i64 {
    let data = redis::Client::open(data).unwrap();
    let mut tasks = Vec::new();
    for lock in locks {
        let data = data.clone();
        tasks.push(tokio::spawn(async move {
            let mut conn = data.get_multiplexed_async_connection().await.unwrap();
            for _ in 0..rounds {
                lock.acquire(Wait::Forever).await.unwrap();
                let n: Option<i64> = redis::cmd("GET")
                    .arg("counted")
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                let _: () = redis::cmd("SET")
                    .arg("counted")
                    .arg(n.unwrap_or(0) + 1)
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                lock.release().await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let mut conn = data.get_multiplexed_async_connection().await.unwrap();
    redis::cmd("GET")
        .arg("counted")
        .query_async(&mut conn)
        .await
        .unwrap()
}
