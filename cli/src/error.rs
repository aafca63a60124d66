//! How `rlock` reports a core error: its message on stderr, a bad option
//! named by its flag, and the exit status it ends with (see `exit.rs`).

use rlock_core::{Error, OptionName};

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
fn flag(option: OptionName) -> &'static str {
    match option {
        OptionName::Ttl => "--ttl",
        OptionName::Timeout => "--timeout",
        OptionName::Blocking => "--no-wait",
        OptionName::SyncReplicas => "--sync-replicas",
        OptionName::Fair => "--fair",
        OptionName::QueueAfter => "--queue-after",
        OptionName::Permits => "--semaphore",
        // One permit per command.
        OptionName::Take => "--semaphore",
        // No flags: `rlock exec` always renews, for as long as CMD runs, and
        // a lease given in a shell is meant as given.
        OptionName::AutoRenew | OptionName::MaxHold | OptionName::AllowLongTtl => option.name(),
        OptionName::Stale => "--stale",
        OptionName::NoneTtl => "--none-ttl",
        OptionName::Jitter => "--jitter",
        OptionName::Early => "--early",
        OptionName::OnError => "--on-error",
        OptionName::LockTtl => "--lock-ttl",
        OptionName::AtLeast => "--at-least",
        OptionName::AtMost => "--at-most",
    }
}
