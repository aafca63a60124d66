//! The Lua scripts of `core/lua/`, compiled in, and their replies.
//!
//! Each call goes out as EVALSHA (the SHA computed once); a server that does
//! not know the script (a restart, SCRIPT FLUSH, a promoted replica) answers
//! NOSCRIPT, and the call is sent again as EVAL, which also caches it. EVAL
//! routes by key like EVALSHA, so on a Cluster the fallback never fans out to
//! every master the way SCRIPT LOAD does (a dead master would stall it).

use std::sync::LazyLock;

use redis::{Cmd, Script, ToRedisArgs};

use crate::error::NotOwnedReason;

/// One script: its source and its SHA.
pub(crate) struct Lua {
    source: &'static str,
    sha: LazyLock<String>,
}

impl Lua {
    fn sha(&'static self) -> &'static str {
        &self.sha
    }

    /// A call of this script with `keys`; its arguments follow with
    /// [`Call::arg`].
    pub(crate) fn call<'a>(&'static self, keys: &[&'a str]) -> Call<'a> {
        Call {
            lua: self,
            keys: keys.to_vec(),
            args: Vec::new(),
        }
    }
}

/// A prepared script call, sendable as EVALSHA or as EVAL.
#[derive(Clone)]
pub(crate) struct Call<'a> {
    lua: &'static Lua,
    keys: Vec<&'a str>,
    args: Vec<Vec<u8>>,
}

impl Call<'_> {
    pub(crate) fn arg(mut self, arg: impl ToRedisArgs) -> Self {
        arg.write_redis_args(&mut self.args);
        self
    }

    pub(crate) fn same_script(&self, other: &Call<'_>) -> bool {
        std::ptr::eq(self.lua, other.lua)
    }

    /// The command: EVALSHA normally, EVAL after a NOSCRIPT.
    pub(crate) fn cmd(&self, eval: bool) -> Cmd {
        let mut c = if eval {
            let mut c = redis::cmd("EVAL");
            c.arg(self.lua.source);
            c
        } else {
            let mut c = redis::cmd("EVALSHA");
            c.arg(self.lua.sha());
            c
        };
        c.arg(self.keys.len()).arg(&self.keys);
        for a in &self.args {
            c.arg(a.as_slice());
        }
        c
    }
}

/// A script from `core/lua/` (the last file), after the helpers it calls,
/// each file followed by a newline. `common.lua` (the replication prologue
/// and `now_ms`) comes first, once, in every script that reads Redis' clock;
/// the other helpers (`mutex/holding.lua`, `mutex/queue.lua`,
/// `many/lib.lua`, `cache/lib.lua`) define functions only, each defined in
/// one file.
macro_rules! lua {
    ($($file:literal),+) => {{
        const SOURCE: &str = concat!($(include_str!(concat!("../../lua/", $file)), "\n"),+);
        Lua {
            source: SOURCE,
            sha: LazyLock::new(|| Script::new(SOURCE).get_hash().to_owned()),
        }
    }};
}

/// The scripts of a mutex (`core/lua/mutex/`).
pub(crate) static ACQUIRE: Lua = lua!("common.lua", "mutex/queue.lua", "mutex/acquire.lua");
pub(crate) static RELEASE: Lua = lua!(
    "common.lua",
    "mutex/holding.lua",
    "mutex/queue.lua",
    "mutex/release.lua"
);
pub(crate) static EXTEND: Lua = lua!("common.lua", "mutex/holding.lua", "mutex/extend.lua");
pub(crate) static INSPECT: Lua = lua!("common.lua", "mutex/queue.lua", "mutex/inspect.lua");
pub(crate) static DEQUEUE: Lua = lua!("mutex/dequeue.lua");
/// A client's registration (`core/lua/client/`).
pub(crate) static REGISTER: Lua = lua!("common.lua", "client/register.lua");
/// A sharded channel's subscribers as its slot's master counts them.
pub(crate) static HEARD: Lua = lua!("client/heard.lua");

/// The scripts of a lock many holders share: a read-write lock or a
/// semaphore (`core/lua/many/`).
pub(crate) mod many {
    use super::*;

    pub(crate) static ACQUIRE: Lua = lua!(
        "common.lua",
        "mutex/queue.lua",
        "many/lib.lua",
        "many/acquire.lua"
    );
    pub(crate) static RELEASE: Lua = lua!(
        "common.lua",
        "mutex/queue.lua",
        "many/lib.lua",
        "many/release.lua"
    );
    pub(crate) static EXTEND: Lua = lua!(
        "common.lua",
        "mutex/queue.lua",
        "many/lib.lua",
        "many/extend.lua"
    );
    pub(crate) static INSPECT: Lua = lua!(
        "common.lua",
        "mutex/queue.lua",
        "many/lib.lua",
        "many/inspect.lua"
    );
    pub(crate) static DEQUEUE: Lua = lua!(
        "common.lua",
        "mutex/queue.lua",
        "many/lib.lua",
        "many/dequeue.lua"
    );
}

/// The scripts of a cache entry (`core/lua/cache/`).
pub(crate) mod cached {
    use super::*;

    pub(crate) static READ: Lua = lua!("common.lua", "cache/lib.lua", "cache/read.lua");
    pub(crate) static WRITE: Lua = lua!("common.lua", "cache/lib.lua", "cache/write.lua");
    pub(crate) static FAIL: Lua = lua!("common.lua", "cache/lib.lua", "cache/fail.lua");
    pub(crate) static INVALIDATE: Lua = lua!("common.lua", "cache/lib.lua", "cache/invalidate.lua");
}

/// Every script the core sends, by name.
fn every_script() -> [(&'static str, &'static Lua); 16] {
    [
        ("mutex acquire", &ACQUIRE),
        ("mutex release", &RELEASE),
        ("mutex extend", &EXTEND),
        ("mutex inspect", &INSPECT),
        ("mutex dequeue", &DEQUEUE),
        ("client register", &REGISTER),
        ("client heard", &HEARD),
        ("many acquire", &many::ACQUIRE),
        ("many release", &many::RELEASE),
        ("many extend", &many::EXTEND),
        ("many inspect", &many::INSPECT),
        ("many dequeue", &many::DEQUEUE),
        ("cache read", &cached::READ),
        ("cache write", &cached::WRITE),
        ("cache fail", &cached::FAIL),
        ("cache invalidate", &cached::INVALIDATE),
    ]
}

/// The script the core sends under `name` ("mutex release", "many
/// acquire", "cache read", …), as it sends it: its files joined, each ended
/// with a newline. For tests that pick the requests of one script by the
/// SHA they carry, so that none assembles a script again.
pub fn source(name: &str) -> Option<&'static str> {
    lookup(name).map(|lua| lua.source)
}

/// The SHA-1 the core sends the script `name` by (EVALSHA); see [`source`].
pub fn sha(name: &str) -> Option<&'static str> {
    lookup(name).map(|lua| lua.sha())
}

fn lookup(name: &str) -> Option<&'static Lua> {
    every_script()
        .into_iter()
        .find(|(n, _)| *n == name)
        .map(|(_, lua)| lua)
}

/// Whether a reply says the server does not know the script.
pub(crate) fn is_noscript(e: &redis::RedisError) -> bool {
    e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript)
}

/// What `acquire.lua` answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AcquireReply {
    Held {
        fence: u64,
        count: u32,
    },
    /// Someone else holds it; `pttl_ms` is its remaining lease (-1: no expiry,
    /// -2: it vanished in between). `queued`: waiters stand in line.
    /// `bad`: the index in the script's KEYS of a key holding a value of
    /// another type (0: none). `issued`: the last fencing token issued in
    /// the name's slot.
    Busy {
        pttl_ms: i64,
        queued: bool,
        bad: usize,
        issued: u64,
    },
    /// A semaphore's size stored in Redis is another than the one asked with.
    SizeDiffers {
        stored: u32,
    },
    /// This owner holds a semaphore with another number of permits than it
    /// asked to re-enter with.
    PermitsDiffer {
        held: u32,
    },
}

impl AcquireReply {
    pub(crate) fn parse(v: &[i64]) -> Option<Self> {
        match v {
            [1, fence, count] => Some(AcquireReply::Held {
                fence: u64::try_from(*fence).ok()?,
                count: u32::try_from(*count).ok()?,
            }),
            [0, pttl, queued, bad, issued] => Some(AcquireReply::Busy {
                pttl_ms: *pttl,
                queued: *queued == 1,
                bad: usize::try_from(*bad).ok()?,
                issued: u64::try_from(*issued).unwrap_or(0),
            }),
            [2, stored] => Some(AcquireReply::SizeDiffers {
                stored: u32::try_from(*stored).ok()?,
            }),
            [3, held] => Some(AcquireReply::PermitsDiffer {
                held: u32::try_from(*held).ok()?,
            }),
            _ => None,
        }
    }
}

/// What an owner-checked script (`release.lua`, `extend.lua`) answered:
/// a non-negative value when the owner matched, otherwise why not (-3: an
/// operator's forced release ended the holding, see `release.lua`).
pub(crate) fn owner_checked(v: i64) -> Result<u32, NotOwnedReason> {
    match v {
        -1 => Err(NotOwnedReason::Expired),
        -3 => Err(NotOwnedReason::Forced),
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
    /// The last fencing token issued in the name's Cluster slot, whose
    /// counter every name of that slot shares (None: never): every token
    /// this name had is at most it, and its next one is above it.
    pub fence_counter: Option<u64>,
    /// Waiters in line (live, or not yet found gone).
    pub waiting: u32,
    /// How long the holding has been held, by Redis' clock (None: free, or
    /// taken by an earlier build, which did not note when).
    pub held_for: Option<std::time::Duration>,
    /// The owner ids of the first [`LINE_SHOWN`] waiters in line, from its
    /// head.
    pub line: Vec<String>,
    /// How long each of them has waited in line, by Redis' clock (None: it
    /// joined with an earlier build, which did not note when).
    pub line_waited: Vec<Option<std::time::Duration>>,
}

/// How many waiters of a line an inspection names.
pub const LINE_SHOWN: usize = 100;

/// What `inspect.lua` answers.
pub(crate) type InspectReply = (
    i64,
    String,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    Vec<String>,
    Vec<i64>,
);

impl LockState {
    pub(crate) fn from_reply(r: InspectReply) -> Self {
        let (held, owner, count, fence, pttl, counter, waiting, held_ms, line, waited) = r;
        let ms = |v: i64| u64::try_from(v).ok().map(std::time::Duration::from_millis);
        LockState {
            held: held != 0,
            owner: (held == 1).then_some(owner),
            count: u32::try_from(count).unwrap_or(0),
            fence: (held == 1 && fence > 0).then_some(fence as u64),
            ttl_ms: u64::try_from(pttl).ok(),
            fence_counter: (counter > 0).then_some(counter as u64),
            waiting: u32::try_from(waiting).unwrap_or(0),
            held_for: ms(held_ms),
            line_waited: (0..line.len())
                .map(|i| waited.get(i).copied().and_then(ms))
                .collect(),
            line,
        }
    }
}

/// One holding of a read-write lock or semaphore, as `many/inspect.lua`
/// reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub owner: String,
    /// Re-entry count.
    pub count: u32,
    pub fence: u64,
    /// A semaphore holding's permits (0 for a read-write lock's).
    pub permits: u32,
    /// Remaining lease in milliseconds.
    pub ttl_ms: u64,
}

impl Holder {
    /// A read-write lock's writer (as the scripts count it: every owner id
    /// that does not end in `/r`).
    pub fn writes(&self) -> bool {
        !self.owner.ends_with("/r")
    }
}

/// The state of a read-write lock or semaphore.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManyHolderState {
    /// A semaphore's size as stored while anyone holds it.
    pub size: Option<u32>,
    /// Every holding whose lease has not ended.
    pub holders: Vec<Holder>,
    /// Waiters in line (live, or not yet found gone).
    pub waiting: u32,
    /// The last fencing token issued in the name's Cluster slot.
    pub fence_counter: Option<u64>,
    /// A key of the lock holds a value of another type (written by something
    /// else): nothing else was read.
    pub foreign: bool,
}

impl ManyHolderState {
    /// The permits held (a semaphore).
    pub fn used(&self) -> u32 {
        self.holders.iter().map(|h| h.permits).sum()
    }

    pub(crate) fn from_reply(v: &[redis::Value]) -> Option<Self> {
        use redis::FromRedisValue;
        let int = |i: usize| -> Option<i64> { i64::from_redis_value(v.get(i)?.clone()).ok() };
        let mut holders = Vec::new();
        let mut i = 4;
        while i + 5 <= v.len() {
            holders.push(Holder {
                owner: String::from_redis_value(v[i].clone()).ok()?,
                count: u32::try_from(int(i + 1)?).ok()?,
                fence: u64::try_from(int(i + 2)?).ok()?,
                permits: u32::try_from(int(i + 3)?).ok()?,
                ttl_ms: u64::try_from(int(i + 4)?).unwrap_or(0),
            });
            i += 5;
        }
        let size = int(0)?;
        let counter = int(2)?;
        Some(ManyHolderState {
            size: u32::try_from(size).ok().filter(|s| *s > 0),
            holders,
            waiting: u32::try_from(int(1)?).unwrap_or(0),
            fence_counter: u64::try_from(counter).ok().filter(|c| *c > 0),
            foreign: int(3)? != 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A helper is defined in one file and prepended once: no assembled
    /// script defines a `local function` twice (a second definition would
    /// shadow the first without a word), nor runs the replication prologue
    /// twice.
    #[test]
    fn each_script_defines_each_helper_once() {
        for (name, lua) in every_script() {
            let mut seen = std::collections::HashSet::new();
            for line in lua.source.lines() {
                if let Some(rest) = line.trim_start().strip_prefix("local function ") {
                    let function = rest.split('(').next().unwrap_or(rest).trim();
                    assert!(seen.insert(function), "{name}: `{function}` defined twice");
                }
            }
            let prologues = lua.source.matches("redis.replicate_commands()").count();
            assert!(
                prologues <= 1,
                "{name}: the replication prologue {prologues} times"
            );
        }
    }

    /// Every script that reads Redis' clock has `common.lua`, first, and
    /// reads it through `now_ms` alone (one place that turns TIME into
    /// milliseconds, after the replication prologue).
    #[test]
    fn a_script_that_reads_the_clock_starts_with_common() {
        let common = include_str!("../../lua/common.lua");
        for (name, lua) in every_script() {
            if lua.source.contains("now_ms()") {
                assert!(
                    lua.source.starts_with(common),
                    "{name}: now_ms without common.lua first"
                );
            }
            let after_common = lua.source.strip_prefix(common).unwrap_or(lua.source);
            assert!(
                !after_common.contains("'TIME'"),
                "{name}: reads TIME outside now_ms"
            );
        }
    }
}
