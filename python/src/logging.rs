//! The core's `tracing` events, handed to Python's `logging` under the
//! `rlock` logger (tracing's `log` feature turns them into `log` records, as
//! no tracing subscriber is set in a Python process).
//!
//! A record is never logged on the thread that made it: that thread may be
//! the runtime's, which renews leases, and must not wait for the GIL. It is
//! queued, a bounded queue, for one forwarding thread per process instead;
//! when Python's handlers fall that far behind, records are dropped rather
//! than memory grown. Whether a level is wanted at all is answered without
//! the GIL, from the `rlock` logger's levels as last read: when a client is
//! made and, by the forwarding thread, at most once a second. So a lock cycle
//! costs nothing when its DEBUG detail is off.
//!
//! No lock guards the forwarder: a forked child would inherit one held by a
//! thread it does not have. A forwarder is published behind an atomic
//! pointer per process generation and never freed (a parent's, in a child,
//! belongs to threads that are gone).

use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::time::{Duration, Instant};

use log::{Level, LevelFilter, Log, Metadata, Record};
use pyo3::prelude::*;

use crate::runtime;

/// How many records may wait for Python before new ones are dropped.
const QUEUE_BOUND: usize = 10_000;
/// How often the forwarding thread reads the logger's levels again.
const LEVELS_EVERY: Duration = Duration::from_secs(1);

/// Records queued and not yet handed to Python (this generation's).
static PENDING: AtomicUsize = AtomicUsize::new(0);
/// The most detailed level the `rlock` logger takes, as a `LevelFilter`.
static WANTED: AtomicUsize = AtomicUsize::new(LevelFilter::Warn as usize);
/// Whether this module's bridge is the process' `log` logger.
static INSTALLED: AtomicBool = AtomicBool::new(false);
static FORWARDER: AtomicPtr<Forwarder> = AtomicPtr::new(ptr::null_mut());

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
    queue: SyncSender<Line>,
}

struct Bridge;

static BRIDGE: Bridge = Bridge;

/// Installs the bridge (once per process) and reads the logger's levels.
pub fn install(py: Python<'_>) -> PyResult<()> {
    // Refused if this process has a logger already (another extension's):
    // then the records are its, and its levels are left alone.
    if log::set_logger(&BRIDGE).is_ok() {
        INSTALLED.store(true, Ordering::SeqCst);
    }
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
    if INSTALLED.load(Ordering::SeqCst) {
        // Records no one wants are not even made.
        log::set_max_level(wanted);
    }
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
        // No forwarding thread (it could not start): the record is dropped,
        // as a full disk drops a log line; the lock goes on.
        let Some(forwarder) = forwarder() else {
            return;
        };
        let made = Line {
            level: record.level(),
            message: record.args().to_string(),
            file: record.file().map(str::to_owned),
            line: record.line().unwrap_or(0),
        };
        PENDING.fetch_add(1, Ordering::SeqCst);
        match forwarder.queue.try_send(made) {
            Ok(()) => {}
            // Python is this far behind, or gone: dropped.
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                PENDING.fetch_sub(1, Ordering::SeqCst);
            }
        }
    }

    fn flush(&self) {}
}

/// This generation's forwarder, started on first use.
fn forwarder() -> Option<&'static Forwarder> {
    let generation = runtime::generation();
    let current = FORWARDER.load(Ordering::Acquire);
    // SAFETY: a published forwarder is never freed.
    if let Some(f) = unsafe { current.as_ref() } {
        if f.generation == generation {
            return Some(f);
        }
    }
    let (queue, records) = mpsc::sync_channel::<Line>(QUEUE_BOUND);
    let fresh = Box::into_raw(Box::new(Forwarder { generation, queue }));
    match FORWARDER.compare_exchange(current, fresh, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => {
            // A forked child's count is its parent's queue, which it lacks.
            PENDING.store(0, Ordering::SeqCst);
            let started = std::thread::Builder::new()
                .name("rlock-log".to_owned())
                .spawn(move || forward_all(records));
            // SAFETY: just published; never freed from now on.
            let published = unsafe { &*fresh };
            started.ok().map(|_| published)
        }
        Err(winner) => {
            // Another thread published first; ours was never shared.
            // SAFETY: `fresh` came from Box::into_raw above.
            drop(unsafe { Box::from_raw(fresh) });
            // SAFETY: as for `current`.
            unsafe { winner.as_ref() }.filter(|f| f.generation == generation)
        }
    }
}

/// The forwarding thread: each record to Python, until the interpreter exits.
fn forward_all(records: Receiver<Line>) {
    let mut levels_read = Instant::now();
    for line in records {
        let forwarded = runtime::with_python(|py| {
            // A handler that raises is logging's to report, as for any
            // record.
            let _ = forward(py, line);
            if levels_read.elapsed() >= LEVELS_EVERY {
                levels_read = Instant::now();
                let _ = read_levels(py);
            }
        });
        PENDING.fetch_sub(1, Ordering::SeqCst);
        if forwarded.is_none() {
            // The interpreter is exiting: nothing can be logged now.
            return;
        }
    }
}

/// At interpreter exit, with the GIL released: lets the queued records
/// reach Python (a loss found just before the program ends is logged too),
/// within `deadline`.
pub fn drain(deadline: Instant) {
    while PENDING.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
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
    Ok(())
}
