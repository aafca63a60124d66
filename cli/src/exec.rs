//! `rlock exec NAME -- CMD`: hold the lock while CMD runs.
//!
//! The lock is taken before CMD starts and released after it ends. While CMD
//! runs the core's watchdog renews the lease; if the lease is lost anyway, CMD
//! is stopped (SIGTERM, then SIGKILL after a grace period), because it no
//! longer runs alone. SIGINT, SIGTERM and SIGHUP sent to rlock are forwarded to
//! CMD, and the lock is released once CMD has exited.

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

use clap::Args;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use rlock_core::{validate, Error, LockArgs, Unit};
use tokio::process::Command;
use tokio::signal::unix::{signal, SignalKind};

use crate::error::fail;
use crate::{exit, Connection};

#[derive(Args, Debug)]
pub struct ExecArgs {
    #[command(flatten)]
    connection: Connection,
    /// Lease in seconds; renewed every ttl/3 while CMD runs.
    #[arg(long, value_name = "SECS", default_value_t = 30.0)]
    ttl: f64,
    /// Give up (exit 75) when the lock is not had within SECS. Default: wait forever.
    #[arg(long, value_name = "SECS", conflicts_with = "no_wait")]
    timeout: Option<f64>,
    /// Make one attempt; exit 75 at once when the lock is busy.
    #[arg(long)]
    no_wait: bool,
    /// After taking the lock, wait until K replicas have it; an acquisition
    /// fewer acknowledged is undone and retried.
    #[arg(long, value_name = "K")]
    sync_replicas: Option<u32>,
    /// Fair mode: wait in line (first come, first served); the lock is handed
    /// to the next waiter in line by each release. Not with several --url.
    #[arg(long)]
    fair: bool,
    /// When not fair: seconds a waiter competes for releases before it takes
    /// a place in that line (0: at once) [default: 0.01].
    #[arg(long, value_name = "SECS")]
    queue_after: Option<f64>,
    /// Seconds between SIGTERM and SIGKILL when the lease is lost.
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    grace: f64,
    /// The lock name.
    name: String,
    /// The command to run, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    command: Vec<OsString>,
}

impl ExecArgs {
    /// The flags that are a lock's options, as the core takes them (checked
    /// there).
    fn lock_args(&self) -> LockArgs {
        LockArgs {
            ttl: Some(self.ttl),
            timeout: self.timeout,
            blocking: !self.no_wait,
            sync_replicas: self.sync_replicas.map(f64::from),
            fair: self.fair,
            queue_after: self.queue_after,
            ..LockArgs::new(Unit::Seconds)
        }
    }
}

pub async fn run(args: ExecArgs) -> u8 {
    // Every argument is checked before any I/O.
    let checked = args.lock_args().check().and_then(|(options, wait)| {
        let grace = validate::span(args.grace, Unit::Seconds)
            .map_err(|problem| Error::invalid(format!("--grace {problem}")))?;
        validate::name(&args.name)?;
        Ok((options, wait, grace))
    });
    let (options, wait, grace) = match checked {
        Ok(c) => c,
        Err(e) => return fail(&e),
    };
    let mut signals = match Signals::new() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("rlock: cannot handle signals: {e}");
            return exit::LOST;
        }
    };
    let client = match args.connection.connect().await {
        Ok(c) => c,
        Err(e) => return fail(&e),
    };
    let lock = match client.lock_with(&args.name, options) {
        Ok(l) => l,
        Err(e) => return fail(&e),
    };
    // A signal while waiting ends the wait; dropping the acquire never leaves
    // a lock behind.
    let held = tokio::select! {
        held = lock.acquire(wait) => held,
        sig = signals.next() => return 128 + sig as u8,
    };
    let held = match held {
        Ok(h) => h,
        Err(Error::Timeout { cause: None, .. }) => {
            eprintln!(
                "rlock: lock {:?} is held by someone else; not running the command",
                args.name
            );
            return exit::NOT_ACQUIRED;
        }
        // Not acquired for another reason (a missed Redlock quorum, too few
        // replicas): the cause says which.
        Err(e @ Error::Timeout { .. }) => {
            eprintln!("rlock: {e}; not running the command");
            return exit::NOT_ACQUIRED;
        }
        Err(e) => return fail(&e),
    };
    let mut command = Command::new(&args.command[0]);
    command
        .args(&args.command[1..])
        .env("RLOCK_FENCING_TOKEN", held.fencing_token.to_string());
    let rlock_pid = nix::unistd::getpid();
    // SAFETY: the closure runs in the forked child before exec and only makes
    // async-signal-safe system calls (prctl, getppid).
    unsafe {
        command.pre_exec(move || {
            // If rlock dies (even by SIGKILL), its lease stops being renewed:
            // the command must not run on without the lock.
            nix::sys::prctl::set_pdeathsig(Signal::SIGTERM).map_err(std::io::Error::from)?;
            if nix::unistd::getppid() != rlock_pid {
                // rlock died before the line above took effect.
                return Err(std::io::Error::other(
                    "rlock exited before the command started",
                ));
            }
            Ok(())
        });
    }
    let spawned = command.spawn();
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            let _ = lock.release().await;
            eprintln!("rlock: cannot run {:?}: {e}", args.command[0]);
            return if e.kind() == std::io::ErrorKind::NotFound {
                exit::NOT_FOUND
            } else {
                exit::NOT_EXECUTABLE
            };
        }
    };
    let pid = child.id().map(|id| Pid::from_raw(id as i32));
    let send = |sig: Signal| {
        if let Some(pid) = pid {
            let _ = kill(pid, sig);
        }
    };
    let lost = lock.lost_signal();
    tokio::pin!(lost);
    let mut lost_reason = None;
    let mut kill_at = None;
    let status: std::io::Result<ExitStatus> = loop {
        tokio::select! {
            status = child.wait() => break status,
            sig = signals.next() => send(sig),
            reason = &mut lost, if lost_reason.is_none() => {
                let Some(reason) = reason else { continue };
                eprintln!("rlock: lease on {:?} lost ({reason}); stopping the command", args.name);
                lost_reason = Some(reason);
                send(Signal::SIGTERM);
                kill_at = Some(tokio::time::Instant::now() + grace);
            }
            _ = sleep_until(kill_at), if kill_at.is_some() => {
                send(Signal::SIGKILL);
                kill_at = None;
            }
        }
    };
    let code = match status {
        Ok(s) => s
            .code()
            .map(|c| c as u8)
            .or_else(|| s.signal().map(|n| 128 + n as u8))
            .unwrap_or(exit::LOST),
        Err(e) => {
            eprintln!("rlock: lost track of the command: {e}");
            exit::LOST
        }
    };
    match lock.finish().await {
        Ok(()) if lost_reason.is_none() => code,
        Ok(()) => exit::LOST,
        Err(e @ Error::Lost { .. }) => {
            if lost_reason.is_none() {
                eprintln!("rlock: {e}");
            }
            exit::LOST
        }
        Err(e) => {
            // The command ran under the lock; a failed release only shortens
            // nothing (the lease ends on its own), so report and keep its status.
            eprintln!("rlock: release failed ({e}); the lease will expire on its own");
            code
        }
    }
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The signals rlock forwards to CMD.
struct Signals {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

impl Signals {
    fn new() -> std::io::Result<Self> {
        Ok(Signals {
            int: signal(SignalKind::interrupt())?,
            term: signal(SignalKind::terminate())?,
            hup: signal(SignalKind::hangup())?,
        })
    }

    async fn next(&mut self) -> Signal {
        tokio::select! {
            _ = self.int.recv() => Signal::SIGINT,
            _ = self.term.recv() => Signal::SIGTERM,
            _ = self.hup.recv() => Signal::SIGHUP,
        }
    }
}
