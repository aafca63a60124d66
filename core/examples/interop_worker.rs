//! A line-driven lock worker: the Rust side of `tests/interop`, where Python,
//! Node, Rust and the `rlock` CLI contend for the same locks on one Redis.
//!
//! Connects to `$REDIS_URL`, then answers one line per command read on stdin:
//!
//! ```text
//! acquire NAME TTL_MS WAIT_MS     -> ok FENCE | busy      (WAIT_MS 0: one attempt)
//! release NAME                    -> ok | err MESSAGE
//! count NAME KEY N PARALLEL       -> ok SEEN:FENCE ...
//! ```
//!
//! `acquire` and `release` act through one handle per name, so acquiring a
//! name twice nests. `count` runs PARALLEL tasks, each its own handle (its own
//! owner), each N times taking the lock and incrementing the integer at KEY
//! with a GET then a SET; it answers the value each holding read with the
//! fencing token it held.
//!
//! ```sh
//! REDIS_URL=redis://127.0.0.1:6379 cargo run -p rlock-core --example interop_worker
//! ```

use std::collections::HashMap;
use std::io::BufRead;
use std::time::Duration;

use rlock_core::{Client, Error, Lock, LockOptions, Wait};

type Failure = Box<dyn std::error::Error + Send + Sync>;

fn main() -> Result<(), Failure> {
    let runtime = tokio::runtime::Runtime::new()?;
    let url = Client::default_url();
    let client = runtime.block_on(Client::connect(&url))?;
    let data = runtime.block_on(async {
        redis::Client::open(url.as_str())?
            .get_multiplexed_async_connection()
            .await
    })?;
    let mut locks: HashMap<String, Lock> = HashMap::new();
    for line in std::io::stdin().lock().lines() {
        let line = line?;
        let words: Vec<&str> = line.split_whitespace().collect();
        let reply = runtime.block_on(async {
            match words.as_slice() {
                ["acquire", name, ttl_ms, wait_ms] => {
                    let lock = match locks.get(*name) {
                        Some(lock) => lock.clone(),
                        None => {
                            let ttl = Duration::from_millis(ttl_ms.parse()?);
                            let lock = client.lock_with(name, LockOptions::default().ttl(ttl))?;
                            locks.insert(name.to_string(), lock.clone());
                            lock
                        }
                    };
                    let wait = match wait_ms.parse()? {
                        0 => Wait::Once,
                        ms => Wait::For(Duration::from_millis(ms)),
                    };
                    Ok::<_, Failure>(match lock.acquire(wait).await {
                        Ok(held) => format!("ok {}", held.fencing_token),
                        Err(Error::Timeout { .. }) => "busy".to_owned(),
                        Err(e) => format!("err {e}"),
                    })
                }
                ["release", name] => Ok(match locks.get(*name) {
                    None => "err never acquired here".to_owned(),
                    Some(lock) => match lock.release().await {
                        Ok(_) => "ok".to_owned(),
                        Err(e) => format!("err {e}"),
                    },
                }),
                ["count", name, key, n, parallel] => {
                    let (n, parallel): (usize, usize) = (n.parse()?, parallel.parse()?);
                    let mut tasks = Vec::new();
                    for _ in 0..parallel {
                        let lock = client.lock(name)?;
                        let (mut data, key) = (data.clone(), key.to_string());
                        tasks.push(tokio::spawn(async move {
                            let mut seen = Vec::new();
                            for _ in 0..n {
                                let held = lock.acquire(Wait::For(Duration::from_secs(60))).await?;
                                let value: Option<i64> =
                                    redis::cmd("GET").arg(&key).query_async(&mut data).await?;
                                let value = value.unwrap_or(0);
                                // Let the other tasks run between GET and SET: only the
                                // lock keeps the increment exact.
                                tokio::task::yield_now().await;
                                let () = redis::cmd("SET")
                                    .arg(&key)
                                    .arg(value + 1)
                                    .query_async(&mut data)
                                    .await?;
                                seen.push(format!("{value}:{}", held.fencing_token));
                                lock.release().await?;
                            }
                            Ok::<_, Failure>(seen)
                        }));
                    }
                    let mut seen = Vec::new();
                    for task in tasks {
                        seen.extend(task.await??);
                    }
                    Ok(format!("ok {}", seen.join(" ")))
                }
                _ => Ok(format!("err unknown command {line:?}")),
            }
        });
        match reply {
            Ok(reply) => println!("{reply}"),
            Err(e) => println!("err {e}"),
        }
    }
    Ok(())
}
