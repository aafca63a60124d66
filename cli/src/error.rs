//! How `rlock` reports a core error: its message on stderr, a bad option
//! named by its flag, and the exit status it ends with (see `exit.rs`).

use rlock_core::{Error, Opt};

use crate::exit;

/// Prints `e` the way every subcommand does and returns its exit status.
pub fn fail(e: &Error) -> u8 {
    match e {
        Error::InvalidArgument(invalid) => {
            eprintln!("rlock: invalid argument: {}", invalid.spelled(flag));
        }
        e => eprintln!("rlock: {e}"),
    }
    exit::for_error(e)
}

/// A lock option as `rlock exec` names it: by its flag.
fn flag(option: Opt) -> &'static str {
    match option {
        Opt::Ttl => "--ttl",
        Opt::Timeout => "--timeout",
        Opt::Blocking => "--no-wait",
        Opt::SyncReplicas => "--sync-replicas",
        Opt::Fair => "--fair",
        Opt::QueueAfter => "--queue-after",
        Opt::Permits => "--semaphore",
        // One permit per command.
        Opt::Take => "--semaphore",
        // No flags: `rlock exec` always renews, for as long as CMD runs, and
        // a lease given in a shell is meant as given.
        Opt::AutoRenew | Opt::MaxHold | Opt::AllowLongTtl => option.name(),
        Opt::Stale => "--stale",
        Opt::NoneTtl => "--none-ttl",
        Opt::Jitter => "--jitter",
        Opt::Early => "--early",
        Opt::OnError => "--on-error",
        Opt::LockTtl => "--lock-ttl",
        Opt::AtLeast => "--at-least",
        Opt::AtMost => "--at-most",
    }
}
