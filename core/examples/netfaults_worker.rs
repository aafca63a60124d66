//! The Rust worker of the network-fault suite (`tests/netfaults`): the same
//! commands and records as its Python and Node workers (see
//! `tests/netfaults/worker.py`), so one checker reads all three.
//!
//! One long-lived process runs schedule after schedule: each line on stdin is
//! a JSON command (`{"op": "run", ...}` or `{"op": "exit"}`), answered with
//! `{"done": RUN}` once every task of the run finished. Each task is its own
//! `Lock` handle (a mutex, the sides of a read-write lock, or a semaphore's
//! permits), so its own owner; a task with `rounds` makes its mutex anew for
//! each, owned by one unit named after the task. Stamps come from
//! CLOCK_MONOTONIC, the clock Python's `time.monotonic_ns()` and Node's
//! `process.hrtime.bigint()` read.
//!
//! ```sh
//! cargo build -p rlock-core --examples && target/debug/examples/netfaults_worker
//! ```

// The futures of the core's acquire nest deep enough to pass the default limit
// when the compiler proves a spawned task `Send`.
#![recursion_limit = "256"]

use std::collections::HashMap;
use std::fs::OpenOptions;
use std::io::{BufRead, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rlock_core::{Client, ClientOptions, Error, Lock, LockOptions, Wait};
use serde_json::{json, Value};

type Failure = Box<dyn std::error::Error + Send + Sync>;

fn now() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write into; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// A small seeded generator, so a task's holds and gaps replay with its seed.
struct Rng(u64);

impl Rng {
    fn uniform(&mut self, range: &Value) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        let (lo, hi) = (
            range[0].as_f64().unwrap_or(0.0),
            range[1].as_f64().unwrap_or(0.0),
        );
        lo + (hi - lo) * ((self.0 >> 11) as f64 / (1u64 << 53) as f64)
    }
}

#[derive(Clone)]
struct Records(Arc<Mutex<std::fs::File>>);

impl Records {
    fn add(&self, mut record: Value, k: &str, name: &str) {
        record["k"] = json!(k);
        record["n"] = json!(name);
        let mut line = record.to_string();
        line.push('\n');
        let mut file = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let _ = file.write_all(line.as_bytes());
    }
}

fn outcome(e: &Error) -> String {
    match e {
        Error::Lost { .. } => "lost".to_owned(),
        Error::NotOwned { .. } => "notowned".to_owned(),
        other => format!("error:{}:{other}", other.category())
            .chars()
            .take(300)
            .collect(),
    }
}

/// A task's lock by side: a read-write lock's two, or one for both (a mutex,
/// a semaphore's permits).
struct Sides {
    read: Lock,
    write: Lock,
}

impl Sides {
    /// `owner`: the unit a mutex is owned by, for a task whose rounds (one
    /// owner waiting again with another lease) each make the lock anew;
    /// otherwise the lock is owned by its handle.
    fn new(client: &Client, task: &Value, name: &str, owner: Option<&str>) -> Result<Sides, Error> {
        let options = LockOptions::default()
            .ttl(Duration::from_millis(
                task["ttl_ms"].as_u64().unwrap_or(1000),
            ))
            .auto_renew(task["auto_renew"].as_bool().unwrap_or(true))
            .fair(task["fair"].as_bool().unwrap_or(false));
        let one = match task["kind"].as_str().unwrap_or("mutex") {
            "rw" => {
                let rw = client.rw_lock(name, options)?;
                return Ok(Sides {
                    read: rw.read().clone(),
                    write: rw.write().clone(),
                });
            }
            "semaphore" => client
                .semaphore(name, task["permits"].as_i64().unwrap_or(1), options)?
                .permits(task["take"].as_i64().unwrap_or(1))?,
            _ => match owner {
                Some(unit) => client.lock_as(name, options, unit)?,
                None => client.lock_with(name, options)?,
            },
        };
        Ok(Sides {
            read: one.clone(),
            write: one,
        })
    }

    fn side(&self, side: &str) -> &Lock {
        match side {
            "read" => &self.read,
            _ => &self.write,
        }
    }
}

async fn run_task(client: Client, task: Value, out: Records) -> Result<(), Failure> {
    let k = task["task"].as_str().unwrap_or("?").to_owned();
    let name = task["name"].as_str().unwrap_or("?").to_owned();
    let mut rng = Rng(task["seed"].as_u64().unwrap_or(1).max(1));
    let rec = |record: Value| out.add(record, &k, &name);
    // One owner for every round: the task (each run takes a lock of its own).
    let rounds = task["rounds"].as_array().cloned();
    let unit = format!("task:{k}");
    let owner = rounds.as_ref().map(|_| unit.as_str());
    let mut sides = match Sides::new(&client, &task, &name, owner) {
        Ok(sides) => sides,
        Err(e) => {
            rec(json!({"e": "refused", "t": now(), "what": outcome(&e)}));
            return Ok(());
        }
    };
    let step = Duration::from_millis(task["step_ms"].as_u64().unwrap_or(5));
    let nest_read = task["nest_read"].as_bool().unwrap_or(false);
    let extend = task["extend"].as_bool().unwrap_or(false);
    if let Some(ms) = task["start_ms"].as_u64() {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
    for i in 0..task["acquisitions"].as_u64().unwrap_or(1) {
        // A round's own lease, timeout and holds over the task's.
        let mut terms = task.clone();
        if let Some(Value::Object(round)) = rounds.as_ref().and_then(|r| r.get(i as usize)) {
            for (key, value) in round {
                terms[key] = value.clone();
            }
            sides = Sides::new(&client, &terms, &name, owner)?;
        }
        let wait = match terms["timeout_ms"].as_u64() {
            Some(ms) => Wait::For(Duration::from_millis(ms)),
            None => Wait::Forever,
        };
        let side = task["sides"][i as usize].as_str();
        let lock = sides.side(side.unwrap_or("write"));
        let inner = if nest_read { sides.side("read") } else { lock };
        match side {
            Some(side) => rec(json!({"e": "wait", "t": now(), "side": side})),
            None => rec(json!({"e": "wait", "t": now()})),
        }
        let held = match lock.acquire(wait).await {
            Ok(held) => held,
            Err(Error::Timeout { .. } | Error::Busy { .. }) => {
                rec(json!({"e": "waited", "t": now(), "out": "timeout"}));
                continue;
            }
            Err(e) => {
                rec(json!({"e": "waited", "t": now(), "out": outcome(&e)}));
                continue;
            }
        };
        let tok = held.fencing_token;
        rec(json!({"e": "enter", "tok": tok, "t": now()}));
        let hold = (rng.uniform(&terms["hold_ms"]) * 1e6) as i64;
        let entered = now();
        let (end, middle) = (entered + hold, entered + hold / 2);
        let (mut nested, mut halfway) = (false, false);
        // When the nested acquire comes (None: none, or done).
        let mut nest_at = task["nest"]
            .as_bool()
            .unwrap_or(false)
            .then(|| entered + task["nest_at_ms"].as_i64().unwrap_or(0) * 1_000_000);
        loop {
            if nest_at.is_some_and(|at| now() >= at) {
                nest_at = None;
                match inner.acquire(Wait::Once).await {
                    Ok(_) => nested = true,
                    Err(e) => rec(
                        json!({"e": "note", "t": now(), "what": format!("nested acquire: {}", outcome(&e))}),
                    ),
                }
                // Either outcome may have reset the lease in Redis: it runs at
                // most its length from here.
                let mut record = json!({"e": "nested", "tok": tok, "t": now()});
                if nested {
                    record["re"] = json!(true);
                }
                rec(record);
            }
            let t = now();
            if lock.lost().is_some() {
                rec(json!({"e": "lost", "tok": tok, "t": now()}));
                break;
            }
            rec(json!({"e": "step", "tok": tok, "t": t}));
            if t >= end {
                break;
            }
            if !halfway && t >= middle {
                halfway = true;
                if nested {
                    nested = false;
                    if let Err(e) = inner.release().await {
                        rec(
                            json!({"e": "note", "t": now(), "what": format!("nested release: {}", outcome(&e))}),
                        );
                    }
                    rec(json!({"e": "nested", "tok": tok, "t": now()}));
                }
                if extend {
                    if let Err(e) = lock.extend(None).await {
                        rec(
                            json!({"e": "note", "t": now(), "what": format!("extend: {}", outcome(&e))}),
                        );
                    }
                    rec(json!({"e": "nested", "tok": tok, "t": now()}));
                }
            }
            tokio::time::sleep(step).await;
        }
        if task["crash"].as_bool().unwrap_or(false) && lock.lost().is_some() {
            // A crashed holder never lets go: its lease runs out in Redis.
            rec(json!({"e": "exit", "tok": tok, "t": now(), "out": "lost"}));
            continue;
        }
        rec(json!({"e": "rel", "tok": tok, "t": now()}));
        let mut result = "released".to_owned();
        if nested {
            if let Err(e) = inner.release().await {
                result = outcome(&e);
            }
        }
        if result == "released" {
            if let Err(e) = lock.release().await {
                result = outcome(&e);
            }
        }
        rec(json!({"e": "exit", "tok": tok, "t": now(), "out": result}));
        let gap = rng.uniform(&task["gap_ms"]);
        if gap > 0.0 {
            tokio::time::sleep(Duration::from_secs_f64(gap / 1000.0)).await;
        }
    }
    Ok(())
}

async fn connect(url: &Value, cluster: bool) -> Result<Client, Failure> {
    Ok(match url {
        Value::Array(urls) => {
            let urls: Vec<&str> = urls.iter().filter_map(Value::as_str).collect();
            Client::connect_urls(&urls, ClientOptions::default().cluster(cluster)).await?
        }
        url => Client::connect(url.as_str().ok_or("url: a string or a list")?).await?,
    })
}

fn main() -> Result<(), Failure> {
    let runtime = tokio::runtime::Runtime::new()?;
    // One client per deployment for the life of the process, as an application
    // keeps one: faults hit its connections, it reconnects.
    let mut clients: HashMap<String, Client> = HashMap::new();
    println!("{}", json!({"ready": true}));
    for line in std::io::stdin().lock().lines() {
        let cmd: Value = serde_json::from_str(&line?)?;
        if cmd["op"] == "exit" {
            break;
        }
        let cluster = cmd["cluster"].as_bool().unwrap_or(false);
        let key = format!("{}{cluster}", cmd["url"]);
        let path = cmd["records"].as_str().ok_or("records: a path")?;
        let out = Records(Arc::new(Mutex::new(
            OpenOptions::new().create(true).append(true).open(path)?,
        )));
        let tasks = cmd["tasks"].as_array().cloned().unwrap_or_default();
        let client = match clients.get(&key) {
            Some(client) => client.clone(),
            None => {
                match runtime.block_on(connect(&cmd["url"], cluster)) {
                    Ok(client) => {
                        clients.insert(key, client.clone());
                        client
                    }
                    // A fault can hit the first connection too: every task's
                    // wait ends with that error, and the next run tries again.
                    Err(e) => {
                        for task in &tasks {
                            let (k, name) = (
                                task["task"].as_str().unwrap_or("?"),
                                task["name"].as_str().unwrap_or("?"),
                            );
                            out.add(json!({"e": "wait", "t": now()}), k, name);
                            out.add(json!({"e": "waited", "t": now(), "out": format!("error:connect:{e}")}), k, name);
                        }
                        println!("{}", json!({"done": cmd["run"]}));
                        continue;
                    }
                }
            }
        };
        runtime.block_on(async {
            let handles: Vec<_> = tasks
                .into_iter()
                .map(|task| tokio::spawn(run_task(client.clone(), task, out.clone())))
                .collect();
            for handle in handles {
                if let Err(e) = handle.await? {
                    eprintln!("task failed: {e}");
                }
            }
            Ok::<_, Failure>(())
        })?;
        println!("{}", json!({"done": cmd["run"]}));
    }
    for client in clients.values() {
        client.close();
    }
    Ok(())
}
