//! `rlock status NAME`: the state of the lock NAME, and of the read-write
//! lock and semaphore of that name when anyone holds or waits on them, as
//! text or one JSON object.

use clap::Args;
use rlock_core::{Client, Inspection, LockOptions, SharedState};

use crate::error::fail;
use crate::{holder, Connection};

#[derive(Args, Debug)]
pub struct StatusArgs {
    #[command(flatten)]
    connection: Connection,
    /// Print one JSON object: {"name", "held", "owner", "ttl_ms", "count", "fence",
    /// "fence_counter", "held_ms", "holder", "waiting", "waiters", "rwlock",
    /// "semaphore"}; a holder or waiter is {"owner", "client_id", "unit",
    /// "client"}, its client {"host", "pid", "process", "face", "version",
    /// "since_ms"} (null without a registration); the last two are null when
    /// nobody holds or waits on them, else {"readers", "writer", "waiting"}
    /// and {"permits", "used", "free", "holders", "waiting"}.
    #[arg(long)]
    json: bool,
    /// The lock name.
    name: String,
}

/// The three locks of one name, read from Redis.
struct States {
    mutex: rlock_core::LockState,
    seen: Inspection,
    rwlock: Option<SharedState>,
    semaphore: Option<SharedState>,
}

async fn read(client: &Client, name: &str) -> rlock_core::Result<States> {
    let defaults = LockOptions::default;
    let seen = client.inspect(name).await?;
    let mutex = seen.state.clone();
    if client.is_redlock() {
        // Read-write locks and semaphores live in one deployment only.
        return Ok(States {
            mutex,
            seen,
            rwlock: None,
            semaphore: None,
        });
    }
    let busy = |s: SharedState| (!s.holders.is_empty() || s.waiting > 0 || s.foreign).then_some(s);
    let rwlock = busy(client.rw_lock(name, defaults())?.state().await?);
    // The size given here is not checked against the stored one: nothing is
    // acquired.
    let semaphore = busy(client.semaphore(name, 1, defaults())?.state().await?);
    Ok(States {
        mutex,
        seen,
        rwlock,
        semaphore,
    })
}

pub async fn run(args: StatusArgs) -> u8 {
    // A bad name is a usage error, before any I/O (not a connection error).
    if let Err(e) = rlock_core::validate::name(&args.name) {
        return fail(&e);
    }
    let client = match args.connection.connect().await {
        Ok(c) => c,
        Err(e) => return fail(&e),
    };
    let states = match read(&client, &args.name).await {
        Ok(s) => s,
        Err(e) => return fail(&e),
    };
    if args.json {
        println!("{}", json(&states));
    } else {
        print!("{}", text(&args.name, &states));
    }
    0
}

fn json(states: &States) -> serde_json::Value {
    let rwlock = states.rwlock.as_ref().map(|s| {
        serde_json::json!({
            "readers": s.holders.iter().filter(|h| !h.writes()).count(),
            "writer": s.holders.iter().any(|h| h.writes()),
            "waiting": s.waiting,
        })
    });
    let semaphore = states.semaphore.as_ref().map(|s| {
        let used = s.used();
        serde_json::json!({
            "permits": s.size,
            "used": used,
            "free": s.size.map(|n| n.saturating_sub(used)),
            "holders": s.holders.len(),
            "waiting": s.waiting,
        })
    });
    let mut out = states.seen.to_json();
    out["rwlock"] = serde_json::json!(rwlock);
    out["semaphore"] = serde_json::json!(semaphore);
    out
}

fn text(name: &str, states: &States) -> String {
    let state = &states.mutex;
    let mut out = if state.held {
        let ttl = state.ttl_ms.map_or("no expiry".to_owned(), |ms| {
            format!("ttl {:.1} s", ms as f64 / 1000.0)
        });
        let fence = state.fence.map_or("none".to_owned(), |f| f.to_string());
        let mut out = format!(
            "{name}: held ({ttl}, count {}, fence {fence})\n",
            state.count
        );
        if let Some(p) = &states.seen.holder {
            let since = state
                .held_for
                .map_or(String::new(), |d| format!(" for {:.1} s", d.as_secs_f64()));
            out += &format!("  holder: {}{since}\n", holder::text(p));
        }
        out
    } else {
        // No token shown: the fence counter is its slot's, shared with other
        // names, so its value would read as this name's last token, which it
        // need not be (the JSON form keeps it, documented as the slot's).
        format!("{name}: free\n")
    };
    if state.waiting > 0 {
        out += &format!("  {} waiting in line\n", state.waiting);
        for p in &states.seen.waiters {
            out += &format!("  waiter: {}\n", holder::text(p));
        }
    }
    if let Some(s) = &states.rwlock {
        let readers = s.holders.iter().filter(|h| !h.writes()).count();
        let writer = match s.holders.iter().any(|h| h.writes()) {
            true => "a writer",
            false => "no writer",
        };
        out += &format!(
            "{name} (read-write lock): {readers} readers, {writer}, {} waiting\n",
            s.waiting
        );
    }
    if let Some(s) = &states.semaphore {
        let used = s.used();
        let size = s.size.map_or("?".to_owned(), |n| n.to_string());
        out += &format!(
            "{name} (semaphore): {used} of {size} permits used, {} holders, {} waiting\n",
            s.holders.len(),
            s.waiting
        );
    }
    out
}
