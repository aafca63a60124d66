//! The Rust worker of the memory soak (`tests/soak`): one loop of one kind
//! against `$REDIS_URL`, paused at every checkpoint so the driver can read
//! this process' memory, threads and connections from outside. Every
//! allocation goes through a counting allocator, so each checkpoint also
//! reports how many allocations are live: a leak shows there as a count that
//! grows with the acquisitions, whatever the allocator does with the pages.
//!
//! ```text
//! soak_worker MODE WARM_UP OPERATIONS CHECKPOINTS
//! ```
//!
//! Modes (4 tasks of one client, each its own owner: outside the cancel mode,
//! two keep one handle and two take a new handle for every acquisition):
//!
//! ```text
//! tasks         one lock, the default options (waiters queue after 10 ms)
//! tasks-fair    one lock, fair
//! uncontended   a lock each: no waiting at all
//! cancel        one lock, waits that end unsatisfied: half dropped (a timeout
//!               around the acquire future), half timed out by Wait::For
//! ```
//!
//! Lines out, each answered by a line in before the worker goes on:
//! `baseline` (a first client made, used and dropped), `at OPS ACQUIRED
//! TIMEOUTS LIVE_ALLOCATIONS` at each checkpoint (the first ends the
//! warm-up), `closed TASKS` (the soak's client closed and dropped, and how
//! many tasks its runtime still runs).

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::BufRead;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::Duration;

use rlock_core::{Client, Error, Lock, LockOptions, Wait};

type Failure = Box<dyn std::error::Error + Send + Sync>;

/// The system allocator, counting live allocations.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is passed straight to the system allocator.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(1, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const PARALLEL: usize = 4;
/// In the cancel mode a holder keeps the lock longer than the others wait.
const HOLD: Duration = Duration::from_millis(2);
const WAIT: Duration = Duration::from_millis(1);

fn pause(line: &str) -> Result<(), Failure> {
    println!("{line}");
    let mut answer = String::new();
    if std::io::stdin().lock().read_line(&mut answer)? == 0 {
        return Err("the driver went away".into());
    }
    Ok(())
}

fn options(mode: &str, i: usize) -> LockOptions {
    match mode {
        "tasks-fair" => LockOptions::default().fair(true),
        // One name, waiters of both kinds in one line.
        "cancel" if i.is_multiple_of(2) => LockOptions::default().fair(true),
        "cancel" => LockOptions::default().queue_after(Duration::ZERO),
        _ => LockOptions::default(),
    }
}

fn locks(client: &Client, mode: &str) -> Result<Vec<Lock>, Failure> {
    let name = format!("soak:{}", uuid_like());
    (0..PARALLEL)
        .map(|i| {
            let name = match mode {
                "uncontended" => format!("{name}:{i}"),
                _ => name.clone(),
            };
            Ok(client.lock_with(&name, options(mode, i))?)
        })
        .collect()
}

/// A name no other run uses (the example has no uuid dependency of its own).
fn uuid_like() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    format!("{}-{nanos}", std::process::id())
}

/// `n` cycles of one task: (acquired, waits that ended unsatisfied).
async fn cycles(mode: String, lock: Lock, i: usize, n: usize) -> Result<(u64, u64), Error> {
    let (mut acquired, mut timeouts) = (0, 0);
    for _ in 0..n {
        if mode != "cancel" {
            // Half the tasks keep one handle, half take a new one (a new
            // owner) for every acquisition, as a server taking the lock per
            // request does.
            let lock = match i < PARALLEL / 2 {
                true => lock.clone(),
                false => lock
                    .client()
                    .lock_with(lock.name(), lock.options().clone())?,
            };
            lock.acquire(Wait::Forever).await?;
            lock.release().await?;
            acquired += 1;
            continue;
        }
        let got = if i.is_multiple_of(2) {
            // Dropping the acquire future is the cancellation under test.
            tokio::time::timeout(WAIT, lock.acquire(Wait::Forever))
                .await
                .ok()
        } else {
            Some(lock.acquire(Wait::For(WAIT)).await)
        };
        match got {
            Some(Ok(_)) => {
                tokio::time::sleep(HOLD).await;
                lock.release().await?;
                acquired += 1;
            }
            None | Some(Err(Error::Timeout { .. })) => timeouts += 1,
            Some(Err(e)) => return Err(e),
        }
    }
    Ok((acquired, timeouts))
}

async fn run(
    client: Client,
    mode: &str,
    chunks: &[usize],
    report: impl Fn(&str) -> Result<(), Failure>,
) -> Result<(), Failure> {
    let locks = locks(&client, mode)?;
    let (mut acquired, mut timeouts) = (0, 0);
    for &n in chunks {
        let tasks: Vec<_> = locks
            .iter()
            .enumerate()
            .map(|(i, lock)| tokio::spawn(cycles(mode.to_owned(), lock.clone(), i, n)))
            .collect();
        for task in tasks {
            let (a, t) = task.await??;
            acquired += a;
            timeouts += t;
        }
        let live = LIVE.load(Ordering::Relaxed);
        report(&format!(
            "at {} {acquired} {timeouts} {live}",
            acquired + timeouts
        ))?;
    }
    client.close();
    Ok(())
}

fn main() -> Result<(), Failure> {
    let args: Vec<String> = std::env::args().collect();
    let [_, mode, warm_up, total, checkpoints] = args.as_slice() else {
        return Err("usage: soak_worker MODE WARM_UP OPERATIONS CHECKPOINTS".into());
    };
    let (warm_up, total, checkpoints): (usize, usize, usize) =
        (warm_up.parse()?, total.parse()?, checkpoints.parse()?);
    let per_task = (total / checkpoints / PARALLEL).max(1);
    // The warm-up lets pools and caches reach their working size before the
    // first reading.
    let warm = (warm_up / PARALLEL).max(1);
    let mut chunks = vec![warm];
    chunks.extend(std::iter::repeat_n(per_task, checkpoints));

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let url = Client::default_url();
    // What the process keeps once any client was used (the runtime's
    // threads): the baseline.
    runtime.block_on(async {
        let client = Client::connect(&url).await?;
        let lock = client.lock_with(&format!("soak:{}", uuid_like()), options(mode, 0))?;
        lock.acquire(Wait::Forever).await?;
        lock.release().await?;
        client.close();
        Ok::<_, Failure>(())
    })?;
    pause("baseline")?;
    runtime.block_on(async {
        let client = Client::connect(&url).await?;
        run(client, mode, &chunks, pause).await
    })?;
    pause(&format!("closed {}", tasks_left(&runtime)))?;
    Ok(())
}

/// The runtime's tasks once the client's have ended (a fair waiter channel
/// lingers 2 s after its last waiter, then its task ends too), waited for up
/// to 5 s.
fn tasks_left(runtime: &tokio::runtime::Runtime) -> usize {
    let metrics = runtime.metrics();
    for _ in 0..500 {
        if metrics.num_alive_tasks() == 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    metrics.num_alive_tasks()
}
