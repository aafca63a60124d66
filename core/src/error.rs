//! The one error type of the core. Every face (Python, Node, CLI) maps these
//! categories to its own idiom in one place of its own (Python exceptions,
//! Node error classes with a stable `code`, the CLI's exit statuses), and
//! `Error::category` names them alike in every face. A bad option names the
//! option as an [`OptionName`], which that same place spells the face's own way.

use std::fmt;

/// Why an operation found that the caller does not hold the lock: what this
/// client knows of the owner's own holdings (it remembers the last releases
/// it reported, a bounded number) combined with what Redis answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotOwnedReason {
    /// This owner never held the lock, or not since its last release was
    /// reported (or that release is too long ago to be remembered).
    NotAcquired,
    /// This owner released the lock and was told so, then released (or
    /// extended) it again.
    AlreadyReleased,
    /// This owner held the lock and its key is gone: the lease ended (or the
    /// key was deleted).
    Expired,
    /// This owner held the lock and another owner holds it now (or a key of
    /// another type sits there).
    HeldByAnother,
    /// This owner held the lock and an operator ended that holding
    /// (`rlock unlock --force`).
    Forced,
}

impl NotOwnedReason {
    /// The reason as the bindings spell it (`LockNotOwned.reason` in Python).
    pub fn as_str(self) -> &'static str {
        match self {
            NotOwnedReason::NotAcquired => "not acquired by this owner",
            NotOwnedReason::AlreadyReleased => "already released",
            NotOwnedReason::Expired => "expired",
            NotOwnedReason::HeldByAnother => "held by another owner",
            NotOwnedReason::Forced => "forced",
        }
    }

    /// How a holding this owner had was lost, when the reason says it had
    /// one (`None`: it held nothing to lose).
    pub fn lost(self) -> Option<LostReason> {
        match self {
            NotOwnedReason::Expired => Some(LostReason::Expired),
            NotOwnedReason::HeldByAnother => Some(LostReason::HeldByAnother),
            NotOwnedReason::Forced => Some(LostReason::Forced),
            NotOwnedReason::NotAcquired | NotOwnedReason::AlreadyReleased => None,
        }
    }
}

impl fmt::Display for NotOwnedReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a lease ended while its holder had not released it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LostReason {
    /// A renewal found the key gone (deleted from outside, or expired).
    Expired,
    /// A renewal found the key owned by someone else.
    HeldByAnother,
    /// The lease ran out while Redis could not be reached to renew it.
    Unreachable,
    /// `max_hold` was reached, so renewal stopped and the lease ran out.
    MaxHold,
    /// Auto-renew was off and the lease ran out.
    LeaseEnded,
    /// The client was closed while the lock was held: `close()` gave it back
    /// (or, when Redis did not answer, left it to expire with its lease).
    Closed,
    /// An operator ended the holding (`rlock unlock --force`).
    Forced,
}

impl LostReason {
    /// Every reason, in declaration order.
    pub const ALL: [LostReason; 7] = [
        LostReason::Expired,
        LostReason::HeldByAnother,
        LostReason::Unreachable,
        LostReason::MaxHold,
        LostReason::LeaseEnded,
        LostReason::Closed,
        LostReason::Forced,
    ];

    /// The reason as one word for metrics labels and log fields.
    pub fn code(self) -> &'static str {
        match self {
            LostReason::Expired => "expired",
            LostReason::HeldByAnother => "held_by_another",
            LostReason::Unreachable => "unreachable",
            LostReason::MaxHold => "max_hold",
            LostReason::LeaseEnded => "lease_ended",
            LostReason::Closed => "closed",
            LostReason::Forced => "forced",
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            LostReason::Expired => "the lock key disappeared as it expired or was deleted",
            LostReason::HeldByAnother => "another owner holds the lock",
            LostReason::Unreachable => "the lease ran out while Redis was unreachable",
            LostReason::MaxHold => "max_hold was reached",
            LostReason::LeaseEnded => "the lease ran out as auto-renew is off",
            LostReason::Closed => "the client was closed",
            LostReason::Forced => "an operator forced its release (rlock unlock --force)",
        }
    }

    /// What a release of a holding lost this way finds in Redis.
    pub fn not_owned(self) -> NotOwnedReason {
        match self {
            LostReason::HeldByAnother => NotOwnedReason::HeldByAnother,
            LostReason::Forced => NotOwnedReason::Forced,
            _ => NotOwnedReason::Expired,
        }
    }
}

impl fmt::Display for LostReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Every failure of the core, in the categories every face shares.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// The lock was not acquired before the deadline (or was busy on a
    /// single attempt). `cause` carries node errors when a quorum was missed.
    #[error("lock {name:?} was not acquired before the deadline{}", cause.as_ref().map(|c| format!(" ({c})")).unwrap_or_default())]
    Timeout { name: String, cause: Option<String> },
    /// A single attempt (`Wait::Once`) found the lock held by someone
    /// else: a timeout with no deadline, in the same category.
    #[error("lock {name:?} is held by someone else")]
    Busy { name: String },
    /// Release or extend of a lock this owner does not hold.
    #[error("lock {name:?} is not held by this owner: {reason}")]
    NotOwned {
        name: String,
        reason: NotOwnedReason,
    },
    /// The lease ended while the holder still ran.
    #[error("lock {name:?} was lost: {reason}")]
    Lost { name: String, reason: LostReason },
    /// Redis unreachable, authentication refused, or a protocol error.
    /// The message never contains a password.
    #[error("redis connection error: {0}")]
    Connection(String),
    /// A bad argument, rejected before any I/O.
    #[error("invalid argument: {0}")]
    InvalidArgument(Invalid),
    /// The client was closed: every operation that would talk to Redis
    /// through it, or its locks, is refused.
    #[error("client closed")]
    Closed,
    /// Write asked by an owner that holds only read of a read-write lock: two
    /// such owners would wait on each other for ever, so it is refused at
    /// once (release the read first; the other way, write then read, is a
    /// downgrade and allowed).
    #[error("lock {name:?}: this owner holds it for reading and asked to write (an upgrade, refused: two upgraders would wait on each other for ever); release the read first")]
    Upgrade { name: String },
    /// The loader of a cache entry failed: the rebuild this caller waited
    /// for (in any process) reported `message`, or this caller's own loader
    /// did (Rust's `Client::cached`). Nothing was stored and the rebuild
    /// lock was given back.
    #[error("cache entry {key:?}: the loader failed: {message}")]
    LoaderFailed { key: String, message: String },
}

impl Error {
    /// A bad argument that is none of a lock's options (a name, a URL).
    pub fn invalid(message: impl Into<String>) -> Self {
        Error::InvalidArgument(Invalid {
            option: None,
            message: message.into(),
        })
    }

    /// A bad value of `option`; `problem` follows the option's name.
    pub(crate) fn invalid_option(option: OptionName, problem: impl Into<String>) -> Self {
        Error::InvalidArgument(Invalid {
            option: Some(option),
            message: problem.into(),
        })
    }

    /// The stable category name shared by every face.
    pub fn category(&self) -> &'static str {
        match self {
            Error::Timeout { .. } | Error::Busy { .. } => "timeout",
            Error::NotOwned { .. } => "not owner",
            Error::Lost { .. } => "lost",
            Error::Connection(_) => "connection",
            Error::InvalidArgument(_) => "bad input",
            Error::Closed => "closed",
            Error::Upgrade { .. } => "upgrade",
            Error::LoaderFailed { .. } => "loader",
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A lock's option, as an error names it: the core knows no face's spelling
/// (`queue_after`, `queueAfterMs`, `--queue-after`), so each face spells it
/// in its own error mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OptionName {
    Ttl,
    Timeout,
    Blocking,
    AutoRenew,
    MaxHold,
    SyncReplicas,
    Fair,
    QueueAfter,
    AllowLongTtl,
    /// A semaphore's size.
    Permits,
    /// The permits one acquisition of a semaphore asks for.
    Take,
    /// A cache entry's stale window, after its ttl.
    Stale,
    /// How long a cache entry for "nothing found" is kept.
    NoneTtl,
    /// How much of a cache entry's ttl is taken off at random.
    Jitter,
    /// The early refresh factor of a cache entry (XFetch's beta).
    Early,
    /// What callers waiting for a failed rebuild do: share or retry.
    OnError,
    /// The lease of a cache entry's rebuild lock.
    LockTtl,
    /// How long a run-once job's lock is kept from its start at the least.
    AtLeast,
    /// How long a run-once job's lock is renewed while it runs at the most.
    AtMost,
}

impl OptionName {
    /// The option's name in Rust ([`LockArgs`](crate::LockArgs)' fields).
    pub fn name(self) -> &'static str {
        match self {
            OptionName::Ttl => "ttl",
            OptionName::Timeout => "timeout",
            OptionName::Blocking => "blocking",
            OptionName::AutoRenew => "auto_renew",
            OptionName::MaxHold => "max_hold",
            OptionName::SyncReplicas => "sync_replicas",
            OptionName::Fair => "fair",
            OptionName::QueueAfter => "queue_after",
            OptionName::AllowLongTtl => "allow_long_ttl",
            OptionName::Permits => "permits",
            OptionName::Take => "take",
            OptionName::Stale => "stale",
            OptionName::NoneTtl => "none_ttl",
            OptionName::Jitter => "jitter",
            OptionName::Early => "early",
            OptionName::OnError => "on_error",
            OptionName::LockTtl => "lock_ttl",
            OptionName::AtLeast => "at_least",
            OptionName::AtMost => "at_most",
        }
    }
}

impl fmt::Display for OptionName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What is wrong with an argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    /// The option at fault, when the argument is one of a lock's options:
    /// `message` then follows its name.
    pub option: Option<OptionName>,
    pub message: String,
}

impl Invalid {
    /// The whole message, the option named as `spell` names it.
    pub fn spelled(&self, spell: impl FnOnce(OptionName) -> &'static str) -> String {
        match self.option {
            Some(option) => format!("{} {}", spell(option), self.message),
            None => self.message.clone(),
        }
    }
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.spelled(OptionName::name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forced_release_is_its_own_reason_in_every_face() {
        assert_eq!(NotOwnedReason::Forced.as_str(), "forced");
        assert_eq!(NotOwnedReason::Forced.lost(), Some(LostReason::Forced));
        assert_eq!(LostReason::Forced.code(), "forced");
        assert_eq!(LostReason::Forced.not_owned(), NotOwnedReason::Forced);
        assert!(LostReason::ALL.contains(&LostReason::Forced));
    }
}
