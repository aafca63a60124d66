//! The Rust worker of S10 (`cached`): the JSON-lines protocol of
//! `bench/cached_worker.py` (requests `read`, `cold`, `seq`), for the
//! contenders `cached:rlock` (the core's `Client::cached`) and
//! `cached:rlock-stale` (the same with a stale window). Each reader is a task
//! on the multi-thread runtime.
//!
//! The loader sleeps `loader_ms`, then RPUSHes "t0 t1 pid" to the `loads`
//! list, and its value (JSON) carries t1, as in the other languages.

use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redis::aio::ConnectionManager;
use rlock_core::{CacheArgs, CacheOptions, Client, ClientOptions, Unit};
use serde_json::{json, Value};

use crate::worker::{number, text};
use crate::{now_ns, Result};

/// What a read needs: the client, the options and the loader's own connection.
#[derive(Clone)]
struct Reader {
    client: Client,
    options: CacheOptions,
    loads: Arc<str>,
    loader_ms: u64,
    conn: ConnectionManager,
}

impl Reader {
    fn new(client: &Client, conn: &ConnectionManager, request: &Value) -> Result<Self> {
        let mut args = CacheArgs::new(Unit::Seconds);
        args.ttl = request["ttl"].as_f64();
        match request["contender"].as_str() {
            Some("cached:rlock") => {}
            Some("cached:rlock-stale") => args.stale = request["stale"].as_f64(),
            other => return Err(format!("unknown contender {other:?}").into()),
        }
        Ok(Reader {
            client: client.clone(),
            options: args.check()?,
            loads: Arc::from(text(request, "loads")?),
            loader_ms: request["loader_ms"].as_u64().ok_or("missing loader_ms")?,
            conn: conn.clone(),
        })
    }

    /// One read of `key`: the t1 of the value it got.
    async fn get(&self, key: &str) -> Result<i64> {
        let (mut conn, loads, pause) = (self.conn.clone(), self.loads.clone(), self.loader_ms);
        let loader = move || async move {
            let t0 = now_ns();
            tokio::time::sleep(Duration::from_millis(pause)).await;
            let t1 = now_ns();
            redis::cmd("RPUSH")
                .arg(&*loads)
                .arg(format!("{t0} {t1} {}", std::process::id()))
                .query_async::<()>(&mut conn)
                .await
                .map_err(|e| e.to_string())?;
            Ok::<_, String>(Some(json!({ "t0": t0, "t1": t1 }).to_string().into_bytes()))
        };
        let value = self
            .client
            .cached(key, self.options.clone(), loader)
            .await?
            .ok_or("the cache gave no value")?;
        let value: Value = serde_json::from_slice(&value)?;
        value["t1"]
            .as_i64()
            .ok_or_else(|| "a value without t1".into())
    }
}

/// A cheap random pause (xorshift; the pauses need spread, not quality).
struct Pauses(u64);

impl Pauses {
    fn new() -> Self {
        static SEED: AtomicU64 = AtomicU64::new(0x9E37_79B9_7F4A_7C15);
        Pauses(SEED.fetch_add(now_ns() as u64 | 1, Ordering::Relaxed) | 1)
    }

    /// Uniform in [0, `max_ms`) milliseconds.
    fn up_to(&mut self, max_ms: f64) -> Duration {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        Duration::from_secs_f64((self.0 >> 11) as f64 / (1u64 << 53) as f64 * max_ms / 1000.0)
    }
}

async fn sleep_until_ns(at: i64) {
    let wait = at - now_ns();
    if wait > 0 {
        tokio::time::sleep(Duration::from_nanos(wait as u64)).await;
    }
}

/// `readers` tasks loop on `key` from `start` to `end`, each pausing a random
/// 0 to 2 × `pace_ms` between reads: one record `[began, ended, value's t1]`
/// per read.
async fn read(reader: Reader, request: Value) -> Result<Value> {
    let key: Arc<str> = Arc::from(text(&request, "key")?);
    let (start, end) = (number(&request, "start")?, number(&request, "end")?);
    let pace = request["pace_ms"].as_f64().ok_or("missing pace_ms")?;
    let errors = Arc::new(AtomicI64::new(0));
    let tasks: Vec<_> = (0..number(&request, "readers")?)
        .map(|_| {
            let (reader, key, errors) = (reader.clone(), key.clone(), errors.clone());
            tokio::spawn(async move {
                let mut pauses = Pauses::new();
                sleep_until_ns(start).await;
                tokio::time::sleep(pauses.up_to(pace)).await;
                let mut rec = Vec::new();
                loop {
                    let began = now_ns();
                    if began >= end {
                        return rec;
                    }
                    match reader.get(&key).await {
                        Ok(t1) => rec.push([began, now_ns(), t1]),
                        Err(_) => {
                            // counted; the reader goes on
                            errors.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    tokio::time::sleep(pauses.up_to(2.0 * pace)).await;
                }
            })
        })
        .collect();
    let mut rec = Vec::new();
    for task in tasks {
        rec.extend(task.await?);
    }
    Ok(json!({ "rec": rec, "errors": errors.load(Ordering::Relaxed) }))
}

/// From `start`, `readers` tasks share out keys `prefix:0` to
/// `prefix:{keys - 1}` in that order, each key read once by this process.
async fn cold(reader: Reader, request: Value) -> Result<Value> {
    let prefix: Arc<str> = Arc::from(text(&request, "prefix")?);
    let keys = number(&request, "keys")?;
    let next = Arc::new(AtomicI64::new(0));
    let errors = Arc::new(AtomicI64::new(0));
    sleep_until_ns(number(&request, "start")?).await;
    let tasks: Vec<_> = (0..number(&request, "readers")?)
        .map(|_| {
            let (reader, prefix, next, errors) =
                (reader.clone(), prefix.clone(), next.clone(), errors.clone());
            tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= keys {
                        return;
                    }
                    if reader.get(&format!("{prefix}:{i}")).await.is_err() {
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        task.await?;
    }
    Ok(json!({ "ended": now_ns(), "errors": errors.load(Ordering::Relaxed) }))
}

/// `n` reads of `key` one after another (the harness counts what they send).
async fn seq(reader: Reader, request: Value) -> Result<Value> {
    let key = text(&request, "key")?;
    let mut lat = Vec::new();
    for _ in 0..number(&request, "n")? {
        let t = now_ns();
        reader.get(key).await?;
        lat.push(now_ns() - t);
    }
    Ok(json!({ "lat": lat }))
}

async fn handle(client: Client, conn: ConnectionManager, request: Value) -> Result<Value> {
    let reader = Reader::new(&client, &conn, &request)?;
    match request["op"].as_str() {
        Some("read") => read(reader, request).await,
        Some("cold") => cold(reader, request).await,
        Some("seq") => seq(reader, request).await,
        other => Err(format!("unknown op {other:?}").into()),
    }
}

pub(crate) fn run(runtime: &tokio::runtime::Runtime, url: &str) -> Result<()> {
    let (client, conn) = runtime.block_on(async {
        let client = Client::connect_urls(&[url.to_string()], ClientOptions::default()).await?;
        let conn = ConnectionManager::new(redis::Client::open(url)?).await?;
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>((client, conn))
    })?;
    let mut out = std::io::stdout().lock();
    for line in std::io::stdin().lock().lines() {
        let request: Value = serde_json::from_str(&line?)?;
        if request["op"] == "exit" {
            break;
        }
        let task = handle(client.clone(), conn.clone(), request);
        let reply = runtime.block_on(async move {
            match tokio::spawn(task).await {
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
