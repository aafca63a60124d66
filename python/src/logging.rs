//! The core's `tracing` events, handed to Python's `logging` under the
//! `rlock` logger (tracing's `log` feature turns them into `log` records, as
//! no tracing subscriber is set in a Python process).
//!
//! A record is never logged on the thread that made it: that thread may be
//! the runtime's, which renews leases, and must not wait for the GIL. It is
//! queued for one forwarding thread per process instead. Whether a level is
//! wanted at all is answered without the GIL, from the `rlock` logger's
//! levels as last read: when a client is made and whenever a record is
//! forwarded. So a lock cycle costs nothing when its DEBUG detail is off.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use log::{Level, LevelFilter, Log, Metadata, Record};
use pyo3::prelude::*;

use crate::runtime;

/// Records queued and not yet handed to Python.
static PENDING: AtomicUsize = AtomicUsize::new(0);

/// The most detailed level the `rlock` logger takes, as a `LevelFilter`.
static WANTED: AtomicUsize = AtomicUsize::new(LevelFilter::Warn as usize);

/// A record as it crosses to the forwarding thread.
struct Line {
    level: Level,
    message: String,
    /// Where in the core it was made.
    file: Option<String>,
    line: u32,
}

struct Forwarder {
    generation: u64,
    queue: Sender<Line>,
}

/// The forwarding thread of this process generation: a forked child starts
/// its own on its first record.
static FORWARDER: Mutex<Option<Forwarder>> = Mutex::new(None);

struct Bridge;

static BRIDGE: Bridge = Bridge;

/// Installs the bridge (once per process) and reads the logger's levels.
pub fn install(py: Python<'_>) -> PyResult<()> {
    // Refused if this process has a logger already: then it has the records.
    let _ = log::set_logger(&BRIDGE);
    read_levels(py)
}

/// Reads which levels the `rlock` logger takes now.
pub fn read_levels(py: Python<'_>) -> PyResult<()> {
    let logger = py
        .import("logging")?
        .call_method1("getLogger", ("rlock",))?;
    let mut wanted = LevelFilter::Off;
    for level in [
        Level::Error,
        Level::Warn,
        Level::Info,
        Level::Debug,
        Level::Trace,
    ] {
        if logger
            .call_method1("isEnabledFor", (python_level(level),))?
            .is_truthy()?
        {
            wanted = level.to_level_filter();
        }
    }
    WANTED.store(wanted as usize, Ordering::Relaxed);
    // Records no one wants are not even made.
    log::set_max_level(wanted);
    Ok(())
}

fn python_level(level: Level) -> u8 {
    match level {
        Level::Error => 40,
        Level::Warn => 30,
        Level::Info => 20,
        Level::Debug => 10,
        Level::Trace => 5,
    }
}

impl Log for Bridge {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        // Only the core's own records: not those of the crates under it.
        metadata.target().starts_with("rlock")
            && metadata.level() as usize <= WANTED.load(Ordering::Relaxed)
    }

    fn log(&self, record: &Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let made = Line {
            level: record.level(),
            message: record.args().to_string(),
            file: record.file().map(str::to_owned),
            line: record.line().unwrap_or(0),
        };
        let mut forwarder = FORWARDER
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let generation = runtime::generation();
        if forwarder
            .as_ref()
            .is_none_or(|f| f.generation != generation)
        {
            *forwarder = start(generation);
        }
        // No forwarding thread (it could not start): the record is dropped,
        // as a full disk drops a log line; the lock goes on.
        if let Some(f) = forwarder.as_ref() {
            PENDING.fetch_add(1, Ordering::SeqCst);
            if f.queue.send(made).is_err() {
                PENDING.fetch_sub(1, Ordering::SeqCst);
            }
        }
    }

    fn flush(&self) {}
}

/// At interpreter exit, with the GIL released: lets the queued records
/// reach Python (a loss found just before the program ends is logged too),
/// within `deadline`.
pub fn drain(deadline: Instant) {
    while PENDING.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn start(generation: u64) -> Option<Forwarder> {
    // A forked child's count is its parent's queue, which it does not have.
    PENDING.store(0, Ordering::SeqCst);
    let (queue, records) = mpsc::channel::<Line>();
    std::thread::Builder::new()
        .name("rlock-log".to_owned())
        .spawn(move || {
            for line in records {
                let forwarded = runtime::with_python(|py| {
                    // A handler that raises is logging's to report, as for
                    // any record.
                    let _ = forward(py, line);
                });
                PENDING.fetch_sub(1, Ordering::SeqCst);
                if forwarded.is_none() {
                    // The interpreter is exiting: nothing can be logged now.
                    return;
                }
            }
        })
        .ok()?;
    Some(Forwarder { generation, queue })
}

/// Logs `line` as made where the core made it (its file and line, not the
/// forwarding thread's place in `logging`).
fn forward(py: Python<'_>, line: Line) -> PyResult<()> {
    let logger = py
        .import("logging")?
        .call_method1("getLogger", ("rlock",))?;
    let level = python_level(line.level);
    if logger.call_method1("isEnabledFor", (level,))?.is_truthy()? {
        let args = pyo3::types::PyTuple::empty(py);
        let record = logger.call_method1(
            "makeRecord",
            (
                "rlock",
                level,
                line.file.as_deref().unwrap_or("rlock"),
                line.line,
                line.message,
                args,
                py.None(),
            ),
        )?;
        logger.call_method1("handle", (record,))?;
    }
    read_levels(py)
}
