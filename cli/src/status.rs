//! `rlock status NAME`: the state of the lock NAME, and of the read-write
//! lock and semaphore of that name when anyone holds or waits on them, as
//! text or one JSON object.

use clap::Args;
use rlock_core::Inspection;

use crate::{holder, Connection};

#[derive(Args, Debug)]
pub struct StatusArgs {
    #[command(flatten)]
    connection: Connection,
    /// Print one JSON object: {"name", "held", "owner", "ttl_ms", "count", "fence",
    /// "fence_counter", "held_ms", "holder", "waiting", "waiters", "rwlock",
    /// "semaphore"}; a holder or waiter is {"owner", "client_id", "unit",
    /// "client", "waited_ms"}, its client {"host", "pid", "process", "face", "version",
    /// "since_ms"} (null without a registration); the last two are null when
    /// nobody holds or waits on them, else {"readers", "writer", "waiting"}
    /// and {"permits", "used", "free", "holders", "waiting"}.
    #[arg(long)]
    json: bool,
    /// The lock name.
    name: String,
}

pub async fn run(args: StatusArgs) -> u8 {
    let (_client, seen) = match args.connection.inspect(&args.name).await {
        Ok(seen) => seen,
        Err(code) => return code,
    };
    if args.json {
        println!("{}", seen.to_json());
    } else {
        print!("{}", text(&args.name, &seen));
    }
    0
}

fn text(name: &str, seen: &Inspection) -> String {
    let state = &seen.state;
    let mut out = if state.held {
        let ttl = state.ttl_ms.map_or("no expiry".to_owned(), |ms| {
            format!("ttl {:.1} s", ms as f64 / 1000.0)
        });
        let fence = state.fence.map_or("none".to_owned(), |f| f.to_string());
        let mut out = format!(
            "{name}: held ({ttl}, count {}, fence {fence})\n",
            state.count
        );
        if let Some(p) = &seen.holder {
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
        for p in &seen.waiters {
            let waited = p
                .waited
                .map_or(String::new(), |d| format!(" for {:.1} s", d.as_secs_f64()));
            out += &format!("  waiter: {}{waited}\n", holder::text(p));
        }
    }
    if let Some(rw) = &seen.rwlock {
        let s = &rw.state;
        let readers = s.holders.iter().filter(|h| !h.writes()).count();
        let writer = match s.holders.iter().any(|h| h.writes()) {
            true => "a writer",
            false => "no writer",
        };
        out += &format!(
            "{name} (read-write lock): {readers} readers, {writer}, {} waiting\n",
            s.waiting
        );
        for (h, p) in s.holders.iter().zip(&rw.holders) {
            let mode = if h.writes() { "writer" } else { "reader" };
            out += &format!("  {mode}: {}\n", holder::text(p));
        }
    }
    if let Some(sem) = &seen.semaphore {
        let s = &sem.state;
        let used = s.used();
        let size = s.size.map_or("?".to_owned(), |n| n.to_string());
        out += &format!(
            "{name} (semaphore): {used} of {size} permits used, {} holders, {} waiting\n",
            s.holders.len(),
            s.waiting
        );
        for (h, p) in s.holders.iter().zip(&sem.holders) {
            out += &format!("  {} permits: {}\n", h.permits, holder::text(p));
        }
    }
    out
}
