//! A line-driven lock worker: the Rust side of `tests/interop`, where Python,
//! Node, Rust and the `rlock` CLI contend for the same locks on one Redis.
//!
//! Connects to `$REDIS_URL`, then answers one line per command read on stdin:
//!
//! ```text
//! acquire LOCK NAME TTL_MS WAIT_MS  -> ok FENCE | busy | upgrade | invalid MESSAGE
//! release LOCK NAME                 -> ok | err MESSAGE
//! count NAME KEY N PARALLEL         -> ok SEEN:FENCE ...
//! ```
//!
//! LOCK is which lock of NAME: `mutex`, `read` or `write` (the sides of its
//! read-write lock), or `semaphore:N` (one permit of its semaphore of N
//! permits). WAIT_MS 0 is one attempt. `upgrade`: a write asked while holding
//! only the read; `invalid`: the arguments were refused (a semaphore's size
//! unlike its holders'), MESSAGE saying why.
//!
//! `acquire` and `release` act through one handle per lock and name (both
//! sides of a read-write lock through one), so acquiring a lock twice nests.
//! `count` runs PARALLEL tasks, each its own handle (its own owner), each N
//! times taking the mutex and incrementing the integer at KEY with a GET then
//! a SET; it answers the value each holding read with the fencing token it
//! held.
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
                ["acquire", which, name, ttl_ms, wait_ms] => {
                    let lock = handle(&client, &mut locks, which, name, ttl_ms)?;
                    let wait = match wait_ms.parse()? {
                        0 => Wait::Once,
                        ms => Wait::For(Duration::from_millis(ms)),
                    };
                    Ok::<_, Failure>(match lock.acquire(wait).await {
                        Ok(held) => format!("ok {}", held.fencing_token),
                        Err(Error::Timeout { .. }) => "busy".to_owned(),
                        Err(Error::Upgrade { .. }) => "upgrade".to_owned(),
                        Err(e @ Error::InvalidArgument(_)) => format!("invalid {e}"),
                        Err(e) => format!("err {e}"),
                    })
                }
                ["release", which, name] => Ok(match locks.get(&format!("{which} {name}")) {
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

/// This worker's lock of `which` on `name`, made on first use.
fn handle(
    client: &Client,
    locks: &mut HashMap<String, Lock>,
    which: &str,
    name: &str,
    ttl_ms: &str,
) -> Result<Lock, Failure> {
    let key = format!("{which} {name}");
    if !locks.contains_key(&key) {
        let options = LockOptions::default().ttl(Duration::from_millis(ttl_ms.parse()?));
        match which {
            "mutex" => {
                locks.insert(key.clone(), client.lock_with(name, options)?);
            }
            "read" | "write" => {
                let rw = client.rw_lock(name, options)?;
                locks.insert(format!("read {name}"), rw.read().clone());
                locks.insert(format!("write {name}"), rw.write().clone());
            }
            _ => {
                let permits = which
                    .strip_prefix("semaphore:")
                    .ok_or_else(|| format!("unknown lock {which:?}"))?;
                let semaphore = client.semaphore(name, permits.parse()?, options)?;
                locks.insert(key.clone(), semaphore.lock().clone());
            }
        }
    }
    Ok(locks[&key].clone())
}
