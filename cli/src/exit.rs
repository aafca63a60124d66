//! Exit codes, from sysexits(3) where one fits; the same table is in
//! `rlock --help` and docs/cli.md.

use rlock_core::Error;

/// The lock could not be had: busy with `--no-wait`, the timeout passed, or
/// no Redlock majority (or too few replicas) granted it in time; `-E CODE`
/// chooses another.
pub const NOT_ACQUIRED: u8 = 75; // EX_TEMPFAIL
/// Redis unreachable, authentication refused.
pub const UNAVAILABLE: u8 = 69; // EX_UNAVAILABLE
/// Bad flags or arguments.
pub const USAGE: u8 = 64; // EX_USAGE
/// The lease was lost while CMD ran, the rebuild a `cached` call waited for
/// failed (or an internal error).
pub const LOST: u8 = 70; // EX_SOFTWARE
/// `cached`: the entry holds "nothing found" (`--none-exit` chooses another).
pub const NOTHING_FOUND: u8 = 66; // EX_NOINPUT
/// `cached`: the value could not be written to stdout.
pub const IO_ERROR: u8 = 74; // EX_IOERR
/// CMD was not found.
pub const NOT_FOUND: u8 = 127;
/// CMD was found but could not be run.
pub const NOT_EXECUTABLE: u8 = 126;

pub const TABLE: &str = "\
Exit status:
  CMD's own     exec: CMD's exit status, or 128+N when CMD was killed by signal N;
                cached: the same when this call ran CMD and it failed
  0             status: the lock was shown (held or free); cached: the value
                was printed; invalidate: the entry is gone (or never was)
  75            the lock was not acquired (busy with --no-wait, --timeout passed,
                or no Redlock majority / too few --sync-replicas before it);
                -E CODE exits CODE instead (flock's default of 1 could not be
                told from CMD's own failure); cached: another caller's rebuild
                stored no value within --timeout
  69            Redis unreachable or authentication refused
  66            cached: the entry holds \"nothing found\" (--none-exit's CODE
                instead, when given)
  64            usage error (bad flag, bad value, bad URL)
  70            the lease was lost while CMD ran (CMD got SIGTERM, then SIGKILL);
                cached: the rebuild this call waited for failed (its message on
                stderr)
  74            cached: the value could not be written to stdout (141 when the
                reader closed the pipe, as if killed by SIGPIPE)
  127           CMD not found (126: found but not executable)";

/// The exit status for a core error.
pub fn for_error(e: &Error) -> u8 {
    match e {
        Error::Timeout { .. } | Error::Busy { .. } => NOT_ACQUIRED,
        // `rlock` closes its client only on its way out.
        Error::Connection(_) | Error::Closed => UNAVAILABLE,
        // (One `rlock exec` holds one side only: it never asks an upgrade.)
        Error::InvalidArgument(_) | Error::Upgrade { .. } => USAGE,
        Error::NotOwned { .. } | Error::Lost { .. } => LOST,
        // Another caller's CMD (or loader) failed: its status is not known
        // here, only its message.
        Error::LoaderFailed { .. } => LOST,
    }
}
