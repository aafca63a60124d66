//! The Lua scripts of `lua/` as `redis::Script`s (each hashed once, sent by
//! EVALSHA with redis-rs' automatic SCRIPT LOAD on NOSCRIPT), and their replies.

use std::sync::LazyLock;

use redis::Script;

use crate::error::NotOwnedReason;

pub(crate) static ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/acquire.lua")));
pub(crate) static RELEASE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/release.lua")));
pub(crate) static EXTEND: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/extend.lua")));
pub(crate) static INSPECT: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/inspect.lua")));

/// What `acquire.lua` answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AcquireReply {
    Held {
        fence: u64,
        count: u32,
    },
    /// Someone else holds it; `pttl_ms` is its remaining lease (-1: no expiry,
    /// -2: it vanished in between).
    Busy {
        pttl_ms: i64,
    },
}

impl AcquireReply {
    pub(crate) fn parse(v: &[i64]) -> Option<Self> {
        match v {
            [1, fence, count] => Some(AcquireReply::Held {
                fence: u64::try_from(*fence).ok()?,
                count: u32::try_from(*count).ok()?,
            }),
            [0, pttl] => Some(AcquireReply::Busy { pttl_ms: *pttl }),
            _ => None,
        }
    }
}

/// What an owner-checked script (`release.lua`, `extend.lua`) answered:
/// a non-negative value when the owner matched, otherwise why not.
pub(crate) fn owner_checked(v: i64) -> Result<u32, NotOwnedReason> {
    match v {
        -1 => Err(NotOwnedReason::Expired),
        v if v < 0 => Err(NotOwnedReason::HeldByAnother),
        v => Ok(u32::try_from(v).unwrap_or(u32::MAX)),
    }
}

/// The state of a lock as `inspect.lua` reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockState {
    /// Someone holds it (through this protocol or a key of another type).
    pub held: bool,
    /// The holder's owner id, when held through this protocol.
    pub owner: Option<String>,
    /// Re-entry count of the holding (0 when free).
    pub count: u32,
    /// Fencing token of the current holding.
    pub fence: Option<u64>,
    /// Remaining lease in milliseconds (None when free or without expiry).
    pub ttl_ms: Option<u64>,
    /// The last fencing token ever issued for this name (None: never).
    pub fence_counter: Option<u64>,
}

impl LockState {
    pub(crate) fn from_reply(r: (i64, String, i64, i64, i64, i64)) -> Self {
        let (held, owner, count, fence, pttl, counter) = r;
        LockState {
            held: held != 0,
            owner: (held == 1).then_some(owner),
            count: u32::try_from(count).unwrap_or(0),
            fence: (held == 1 && fence > 0).then_some(fence as u64),
            ttl_ms: u64::try_from(pttl).ok(),
            fence_counter: (counter > 0).then_some(counter as u64),
        }
    }
}
