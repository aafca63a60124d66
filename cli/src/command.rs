//! The command `rlock` runs (`exec`'s CMD, `cached`'s rebuild): started
//! tied to rlock's life, the signals rlock passes on to it, and its end as
//! rlock's exit status.

use std::ffi::OsStr;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

use nix::sys::signal::Signal;
use tokio::process::Command;
use tokio::signal::unix::{signal, SignalKind};

use crate::exit;

/// `program args...`, which gets SIGTERM when rlock dies, even by SIGKILL:
/// what it does is rlock's to watch (a lock's lease, a rebuild's value), and
/// no longer anyone's once rlock is gone.
pub fn tied(program: &OsStr, args: &[impl AsRef<OsStr>]) -> Command {
    let mut command = Command::new(program);
    command.args(args);
    let rlock_pid = nix::unistd::getpid();
    // SAFETY: the closure runs in the forked child before exec and only makes
    // async-signal-safe system calls (prctl, getppid).
    unsafe {
        command.pre_exec(move || {
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
    command
}

/// rlock's exit status when the command could not be started, as a shell's.
pub fn not_started(e: &std::io::Error) -> u8 {
    if e.kind() == std::io::ErrorKind::NotFound {
        exit::NOT_FOUND
    } else {
        exit::NOT_EXECUTABLE
    }
}

/// The command's end as a shell reports it: its exit code, or 128+N when
/// signal N killed it.
pub fn exit_code(status: ExitStatus) -> u8 {
    status
        .code()
        .map(|c| c as u8)
        .or_else(|| status.signal().map(|n| 128 + n as u8))
        .unwrap_or(exit::LOST)
}

/// How long rlock, stopped by a signal while it waited, lets the clean-up of
/// that wait reach Redis before it exits (Redis may not answer at all).
const SETTLE_WITHIN: std::time::Duration = std::time::Duration::from_secs(2);

/// A signal ended a wait: its place in line (or a grant it was handed) is
/// left in the background; rlock exits once that is done, not before, so it
/// leaves no waiter behind that nobody is.
pub async fn settle(client: &rlock_core::Client) {
    let _ = tokio::time::timeout(SETTLE_WITHIN, client.settled()).await;
}

/// The signals rlock forwards to the command.
pub struct Signals {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

impl Signals {
    pub fn new() -> std::io::Result<Self> {
        Ok(Signals {
            int: signal(SignalKind::interrupt())?,
            term: signal(SignalKind::terminate())?,
            hup: signal(SignalKind::hangup())?,
        })
    }

    pub async fn next(&mut self) -> Signal {
        tokio::select! {
            _ = self.int.recv() => Signal::SIGINT,
            _ = self.term.recv() => Signal::SIGTERM,
            _ = self.hup.recv() => Signal::SIGHUP,
        }
    }
}
