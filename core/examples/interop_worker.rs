//! A line-driven lock worker: the Rust side of `tests/interop`, where Python,
//! Node, Rust and the `rlock` CLI contend for the same locks on one Redis.
//!
//! Connects to `$REDIS_URL`, then answers one line per command read on stdin:
//!
//! ```text
//! acquire LOCK NAME TTL_MS WAIT_MS  -> ok FENCE | busy | upgrade | invalid MESSAGE
//! release LOCK NAME                 -> ok | err MESSAGE
//! count NAME KEY N PARALLEL         -> ok SEEN:FENCE ...
//! cached KEY COUNTER GATE LOADER    -> ready, then after a `go` line:
//!                                      loaded|got TYPE HEX | failed MESSAGE
//!                                      | loader-failed KEY MESSAGE | timeout
//! invalidate KEY                    -> ok true|false
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
//! `cached` reads the cache entry KEY (ttl 60 s) once a `go` line follows
//! its `ready`, so the test can start readers of every runtime together.
//! Its loader INCRs COUNTER; unless GATE is `-` it then waits until it pops
//! an item off the list GATE (the test holds it there until every other
//! reader waits); then it gives what LOADER says: `bytes:HEX`, `text:HEX` and
//! `json:HEX` are those bytes (this face stores bytes as they are), `none`
//! is nothing found, `fail:HEX` fails with that message. The answer:
//! `loaded` (this reader's loader ran) or `got`, with the value as
//! `bytes HEX` or `none`; `failed` when this reader's own loader failed;
//! `loader-failed` with the error's key when the load it waited for failed;
//! `timeout`.
//!
//! ```sh
//! REDIS_URL=redis://127.0.0.1:6379 cargo run -p rlock-core --example interop_worker
//! ```

use std::collections::HashMap;
use std::io::BufRead;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use rlock_core::{CacheOptions, Client, Error, Lock, LockOptions, Wait};

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
    // One reader of stdin: `cached` reads its `go` line from it too.
    let mut input = std::io::stdin().lock().lines();
    while let Some(line) = input.next() {
        let line = line?;
        let words: Vec<&str> = line.split_whitespace().collect();
        if let ["cached", ..] = words.as_slice() {
            println!("ready");
            if !matches!(input.next(), Some(Ok(go)) if go == "go") {
                println!("err expected go");
                continue;
            }
        }
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
                        Err(Error::Timeout { .. } | Error::Busy { .. }) => "busy".to_owned(),
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
                ["cached", key, counter, gate, spec] => {
                    let (kind, arg) = spec.split_once(':').unwrap_or((spec, ""));
                    let (kind, raw) = (kind.to_owned(), unhex(arg)?);
                    let ran = Arc::new(AtomicBool::new(false));
                    let (counter, gate, mut data) =
                        (counter.to_string(), gate.to_string(), data.clone());
                    let load = {
                        let ran = ran.clone();
                        move || async move {
                            ran.store(true, Ordering::SeqCst);
                            loading(&mut data, &counter, &gate).await?;
                            match kind.as_str() {
                                "fail" => Err(String::from_utf8_lossy(&raw).into_owned()),
                                "none" => Ok(None),
                                _ => Ok(Some(raw)),
                            }
                        }
                    };
                    let options = CacheOptions::new(Duration::from_secs(60));
                    Ok(match client.cached(key, options, load).await {
                        Ok(value) => {
                            let got = if ran.load(Ordering::SeqCst) {
                                "loaded"
                            } else {
                                "got"
                            };
                            match value {
                                Some(bytes) => format!("{got} bytes {}", hex(&bytes)),
                                None => format!("{got} none"),
                            }
                        }
                        // This face reports its own loader's failure as the
                        // waiters' error: whether the loader ran tells them apart.
                        Err(Error::LoaderFailed { message, .. }) if ran.load(Ordering::SeqCst) => {
                            format!("failed {message}")
                        }
                        Err(Error::LoaderFailed { key, message }) => {
                            format!("loader-failed {key} {message}")
                        }
                        Err(Error::Timeout { .. }) => "timeout".to_owned(),
                        Err(e) => format!("err {e}"),
                    })
                }
                ["invalidate", key] => Ok(match client.invalidate(key).await {
                    Ok(deleted) => format!("ok {deleted}"),
                    Err(e) => format!("err {e}"),
                }),
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

/// What the loader of `cached` does before it gives its value: INCRs
/// `counter`, then (unless `gate` is `-`) waits for an item on `gate`.
async fn loading(
    data: &mut MultiplexedConnection,
    counter: &str,
    gate: &str,
) -> Result<(), String> {
    let _: i64 = redis::cmd("INCR")
        .arg(counter)
        .query_async(data)
        .await
        .map_err(|e| e.to_string())?;
    if gate != "-" {
        opened(data, gate).await?;
    }
    Ok(())
}

/// Returns once an item is popped off the list `gate`.
async fn opened(data: &mut MultiplexedConnection, gate: &str) -> Result<(), String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let item: Option<Vec<u8>> = redis::cmd("LPOP")
            .arg(gate)
            .query_async(data)
            .await
            .map_err(|e| e.to_string())?;
        if item.is_some() {
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            return Err(format!("nobody pushed to {gate} within 20 s"));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Result<Vec<u8>, Failure> {
    (0..text.len())
        .step_by(2)
        .map(|i| {
            text.get(i..i + 2)
                .ok_or_else(|| Failure::from(format!("odd hex {text:?}")))
                .and_then(|pair| Ok(u8::from_str_radix(pair, 16)?))
        })
        .collect()
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
