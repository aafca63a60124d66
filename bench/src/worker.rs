//! The Rust worker: the same JSON-lines protocol as `bench/worker.py` and
//! `bench/worker.js` (one request per line, one reply per line), for the
//! contenders `rlock` (the core's mutex) and `floor` (redis-rs sending the
//! bare SET NX PX + EVALSHA compare-and-delete cycle); `rlock-fair` is the
//! mutex in fair mode, `sem:rlock` one permit of a semaphore of `permits`
//! permits, `read:rlock` and `write:rlock` the two sides of a read-write lock.
//!
//! Each request runs as a task on the multi-thread runtime, the way async Rust
//! code using the core runs.

use std::io::{BufRead, Write};
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::aio::ConnectionManager;
use rlock_core::{Client, ClientOptions, Lock, LockOptions, Wait};
use serde_json::{json, Value};
use tokio::sync::OnceCell;

use crate::{now_ns, Result};

/// The compare-and-delete script of the floor cycle (the same text in every worker).
const COMPARE_AND_DELETE: &str =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

struct Shared {
    urls: Vec<String>,
    client: OnceCell<Client>,
    floor: OnceCell<(ConnectionManager, String)>,
}

impl Shared {
    async fn client(&self) -> Result<Client> {
        let client = self
            .client
            .get_or_try_init(|| Client::connect_urls(&self.urls, ClientOptions::default()))
            .await?;
        Ok(client.clone())
    }

    async fn floor(&self) -> Result<(ConnectionManager, String)> {
        let floor = self
            .floor
            .get_or_try_init(|| floor_connection(&self.urls[0]))
            .await?;
        Ok(floor.clone())
    }
}

/// A connection for the floor cycle, with its compare-and-delete script loaded.
pub(crate) async fn floor_connection(url: &str) -> Result<(ConnectionManager, String)> {
    let client = redis::Client::open(url)?;
    let mut conn = ConnectionManager::new(client).await?;
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(COMPARE_AND_DELETE)
        .query_async(&mut conn)
        .await?;
    Ok((conn, sha))
}

/// One floor cycle on `key`: SET NX PX, then the compare-and-delete script.
pub(crate) async fn floor_cycle(mut conn: ConnectionManager, sha: &str, key: &str) -> Result<()> {
    if !floor_acquire(&mut conn, key).await? {
        return Err("floor: the key was taken".into());
    }
    floor_release(&mut conn, sha, key).await
}

/// The floor cycle with each request counted in flight, as the core counts
/// its own (`rlock_core::spin`): run awake, its caller polls for the replies.
pub(crate) async fn floor_cycle_counted(
    mut conn: ConnectionManager,
    sha: &str,
    key: &str,
) -> Result<()> {
    if !rlock_core::spin::awaited(floor_acquire(&mut conn, key)).await? {
        return Err("floor: the key was taken".into());
    }
    rlock_core::spin::awaited(floor_release(&mut conn, sha, key)).await
}

async fn floor_acquire(conn: &mut ConnectionManager, key: &str) -> Result<bool> {
    let set: Option<String> = redis::cmd("SET")
        .arg(key)
        .arg(TOKEN)
        .arg("NX")
        .arg("PX")
        .arg(30_000)
        .query_async(conn)
        .await?;
    Ok(set.is_some())
}

async fn floor_release(conn: &mut ConnectionManager, sha: &str, key: &str) -> Result<()> {
    let deleted: i64 = redis::cmd("EVALSHA")
        .arg(sha)
        .arg(1)
        .arg(key)
        .arg(TOKEN)
        .query_async(conn)
        .await?;
    if deleted != 1 {
        return Err("floor: the key was not ours".into());
    }
    Ok(())
}

/// One contender's lock on one key.
enum Contender {
    Rlock(Lock),
    Floor {
        conn: ConnectionManager,
        sha: String,
        key: String,
    },
}

const TOKEN: &str = "rlock-bench-floor";

impl Contender {
    /// `permits`: the size of a semaphore (the other kinds take no notice).
    async fn new(
        shared: &Shared,
        name: &str,
        key: &str,
        ttl: Duration,
        permits: i64,
    ) -> Result<Self> {
        let options = LockOptions::default().ttl(ttl);
        match name {
            "rlock" | "rlock-fair" => {
                let options = options.fair(name == "rlock-fair");
                let lock = shared.client().await?.lock_with(key, options)?;
                Ok(Contender::Rlock(lock))
            }
            "sem:rlock" => {
                let sem = shared.client().await?.semaphore(key, permits, options)?;
                Ok(Contender::Rlock(sem.lock().clone()))
            }
            "read:rlock" | "write:rlock" => {
                let rw = shared.client().await?.rw_lock(key, options)?;
                let side = if name == "read:rlock" {
                    rw.read()
                } else {
                    rw.write()
                };
                Ok(Contender::Rlock(side.clone()))
            }
            "floor" => {
                let (conn, sha) = shared.floor().await?;
                Ok(Contender::Floor {
                    conn,
                    sha,
                    key: key.to_owned(),
                })
            }
            other => Err(format!("unknown contender {other:?}").into()),
        }
    }

    /// Waits until acquired (the floor makes one attempt: it is only used uncontended).
    async fn acquire(&mut self) -> Result<bool> {
        match self {
            Contender::Rlock(lock) => Ok(lock.acquire(Wait::Forever).await.is_ok()),
            Contender::Floor { conn, key, .. } => floor_acquire(conn, key).await,
        }
    }

    async fn release(&mut self) -> Result<()> {
        match self {
            Contender::Rlock(lock) => {
                lock.release().await?;
            }
            Contender::Floor { conn, sha, key } => floor_release(conn, sha, key).await?,
        }
        Ok(())
    }
}

pub(crate) fn run(runtime: &tokio::runtime::Runtime, urls: &[String]) -> Result<()> {
    let shared = Arc::new(Shared {
        urls: urls.to_vec(),
        client: OnceCell::new(),
        floor: OnceCell::new(),
    });
    let mut out = std::io::stdout().lock();
    for line in std::io::stdin().lock().lines() {
        let request: Value = serde_json::from_str(&line?)?;
        if request["op"] == "exit" {
            break;
        }
        let shared = shared.clone();
        let reply = runtime.block_on(async move {
            match tokio::spawn(handle(shared, request)).await {
                Ok(Ok(v)) => v,
                Ok(Err(e)) => json!({ "error": e.to_string() }),
                Err(e) => json!({ "error": e.to_string() }),
            }
        });
        writeln!(out, "{reply}")?;
        out.flush()?;
    }
    Ok(())
}

pub(crate) fn text<'a>(request: &'a Value, field: &str) -> Result<&'a str> {
    request[field]
        .as_str()
        .ok_or_else(|| format!("missing {field}").into())
}

pub(crate) fn number(request: &Value, field: &str) -> Result<i64> {
    request[field]
        .as_i64()
        .ok_or_else(|| format!("missing {field}").into())
}

/// The size of a semaphore contender (1 when the request names none).
fn permits(request: &Value) -> i64 {
    request["permits"].as_i64().unwrap_or(1)
}

/// Milliseconds from an optional field (0 when absent).
fn millis(request: &Value, field: &str) -> Duration {
    Duration::from_millis(request[field].as_u64().unwrap_or(0))
}

async fn handle(shared: Arc<Shared>, request: Value) -> Result<Value> {
    let contender = text(&request, "contender")?;
    let key = text(&request, "key")?;
    match text(&request, "op")? {
        "s1" => s1(&shared, &request, contender, key).await,
        "s2" => s2(&shared, contender, key, &request).await,
        "s7" => s7(&shared, contender, key, &request).await,
        "idle" => idle(&shared, contender, key, &request).await,
        other => Err(format!("unknown op {other:?}").into()),
    }
}

/// S1: `n` uncontended acquire + release cycles; the latency of each. With
/// `pair`, that contender's cycles alternate with them in chunks of `chunk`
/// (its latencies come back as `pair_lat`).
async fn s1(shared: &Shared, request: &Value, contender: &str, key: &str) -> Result<Value> {
    let n = number(request, "n")?;
    let chunk = request["chunk"].as_i64().unwrap_or(n).max(1);
    let ttl = Duration::from_secs(30);
    let take = permits(request);
    let mut runs = vec![(0, Contender::new(shared, contender, key, ttl, take).await?)];
    if let Some(pair) = request["pair"].as_str() {
        let paired = Contender::new(shared, pair, &format!("{key}:pair"), ttl, 1).await?;
        runs.insert(0, (1, paired));
    }
    let mut lat: [Vec<u64>; 2] = [Vec::new(), Vec::new()];
    let mut wall = [0u64; 2];
    let mut done = 0;
    while done < n {
        let k = chunk.min(n - done);
        for (which, c) in runs.iter_mut() {
            let start = Instant::now();
            for _ in 0..k {
                let t = Instant::now();
                if !c.acquire().await? {
                    return Err("uncontended acquire failed".into());
                }
                c.release().await?;
                lat[*which].push(t.elapsed().as_nanos() as u64);
            }
            wall[*which] += start.elapsed().as_nanos() as u64;
        }
        done += k;
    }
    let [lat, pair_lat] = lat;
    Ok(json!({ "lat": lat, "pair_lat": pair_lat, "wall": wall[0], "pair_wall": wall[1] }))
}

/// S2 and the other loops: acquire / hold / release, from `start` until
/// `end` (monotonic ns). With `counter`, the hold increments a shared
/// non-atomic counter (a file); `hold_ms` sleeps inside, `pause_ms` after
/// each release. One record `[wanted, acquired, releasing, released]` per
/// acquisition.
async fn s2(shared: &Shared, contender: &str, key: &str, request: &Value) -> Result<Value> {
    let start = number(request, "start")?;
    let end = number(request, "end")?;
    let counter = match request["counter"].as_str() {
        Some(path) => Some(
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(path)?,
        ),
        None => None,
    };
    let (hold, pause) = (millis(request, "hold_ms"), millis(request, "pause_ms"));
    let ttl = Duration::from_secs(30);
    let size = permits(request);
    let warm_key = text(request, "warm")?;
    let mut warm = Contender::new(shared, contender, warm_key, ttl, size).await?;
    warm.acquire().await?;
    warm.release().await?;
    let mut c = Contender::new(shared, contender, key, ttl, size).await?;
    let wait = start - now_ns();
    if wait > 0 {
        tokio::time::sleep(Duration::from_nanos(wait as u64)).await;
    }
    let mut records = Vec::new();
    let mut errors = 0u64;
    loop {
        let wanted = now_ns();
        if wanted >= end {
            break;
        }
        loop {
            match c.acquire().await {
                Ok(true) => break,
                Ok(false) | Err(_) => errors += 1,
            }
        }
        let acquired = now_ns();
        if let Some(counter) = &counter {
            // The non-atomic counter: two holders at once would lose an increment.
            let mut buf = [0u8; 8];
            counter.read_at(&mut buf, 0)?;
            counter.write_at(&(u64::from_le_bytes(buf) + 1).to_le_bytes(), 0)?;
        }
        sleep_on_thread(hold);
        let releasing = now_ns();
        c.release().await?;
        records.push([wanted, acquired, releasing, now_ns()]);
        sleep_on_thread(pause);
    }
    Ok(json!({ "rec": records, "errors": errors }))
}

/// Sleeps this task's thread for `d`: tokio's timer rounds up to whole
/// milliseconds (1 ms takes 2), the thread's own sleep takes what Python's
/// and Node's sleeps take. Only the loops of `s2` sleep, one task each.
fn sleep_on_thread(d: Duration) {
    if !d.is_zero() {
        tokio::task::block_in_place(|| std::thread::sleep(d));
    }
}

/// S7: `handles` tasks of this process, each with its own lock on `key` (one
/// client), loop acquire / increment a counter / release from `start` until
/// `end`; one record `[wanted, acquired, releasing, released]` per
/// acquisition, per task.
async fn s7(shared: &Shared, contender: &str, key: &str, request: &Value) -> Result<Value> {
    let start = number(request, "start")?;
    let end = number(request, "end")?;
    let ttl = Duration::from_secs(30);
    let mut contenders = Vec::new();
    for _ in 0..number(request, "handles")? {
        contenders.push(Contender::new(shared, contender, key, ttl, 1).await?);
    }
    let mut warm = Contender::new(shared, contender, text(request, "warm")?, ttl, 1).await?;
    warm.acquire().await?;
    warm.release().await?;
    let wait = start - now_ns();
    if wait > 0 {
        tokio::time::sleep(Duration::from_nanos(wait as u64)).await;
    }
    let counter = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = contenders
        .into_iter()
        .map(|mut c| {
            let counter = counter.clone();
            tokio::spawn(async move {
                let mut records = Vec::new();
                loop {
                    let wanted = now_ns();
                    if wanted >= end {
                        return Ok::<_, Box<dyn std::error::Error + Send + Sync>>(records);
                    }
                    if !c.acquire().await? {
                        return Err("an acquire without a deadline failed".into());
                    }
                    let acquired = now_ns();
                    // A load and a store, not one atomic add: two holders at
                    // once could lose an increment.
                    let value = counter.load(Ordering::Acquire);
                    counter.store(value + 1, Ordering::Release);
                    let releasing = now_ns();
                    c.release().await?;
                    records.push([wanted, acquired, releasing, now_ns()]);
                }
            })
        })
        .collect();
    let mut recs = Vec::new();
    for task in tasks {
        recs.push(task.await??);
    }
    Ok(json!({ "recs": recs, "counter": counter.load(Ordering::Acquire) }))
}

/// Idle waiters: `permits` holders with a long lease, then `waiters` handles
/// waiting on the same key, of the kinds in `waiter_kinds` in turn (the
/// contender's own by default). Answers once they are waiting; the harness
/// measures, then ends this process.
async fn idle(shared: &Shared, contender: &str, key: &str, request: &Value) -> Result<Value> {
    let ttl = Duration::from_secs(60);
    let size = permits(request);
    let kinds: Vec<&str> = match request["waiter_kinds"].as_array() {
        Some(kinds) if !kinds.is_empty() => kinds.iter().filter_map(Value::as_str).collect(),
        _ => vec![contender],
    };
    for _ in 0..size {
        let mut holder = Contender::new(shared, contender, key, ttl, size).await?;
        if !holder.acquire().await? {
            return Err("the holder could not acquire".into());
        }
        std::mem::forget(holder);
    }
    for i in 0..number(request, "waiters")? {
        let kind = kinds[i as usize % kinds.len()];
        let mut c = Contender::new(shared, kind, key, ttl, size).await?;
        tokio::spawn(async move {
            let _ = c.acquire().await;
        });
    }
    Ok(json!({ "ready": true }))
}
