//! `rlock watch NAME`: follows the lock NAME until Ctrl-C, one line per
//! change seen (acquired, re-entered, released, handed over, expired, the
//! line's length). It reads the lock every [`EVERY`]: a holding that begins
//! and ends between two reads is not seen.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Args;
use rlock_core::Inspection;

use crate::error::fail;
use crate::{holder, Connection};

/// How often the lock is read.
const EVERY: Duration = Duration::from_millis(100);

#[derive(Args, Debug)]
pub struct WatchArgs {
    #[command(flatten)]
    connection: Connection,
    /// The lock name.
    name: String,
}

pub async fn run(args: WatchArgs) -> u8 {
    let client = match args.connection.client_for(&args.name).await {
        Ok(c) => c,
        Err(code) => return code,
    };
    let stop = tokio::signal::ctrl_c();
    tokio::pin!(stop);
    let mut last: Option<(Inspection, Instant)> = None;
    loop {
        let read_at = Instant::now();
        let seen = match client.inspect(&args.name).await {
            Ok(s) => s,
            Err(e) => return fail(&e),
        };
        for change in changes(last.as_ref(), &seen, read_at) {
            println!("{} {}: {change}", clock(), args.name);
        }
        last = Some((seen, read_at));
        tokio::select! {
            _ = &mut stop => return 0,
            _ = tokio::time::sleep(EVERY) => {}
        }
    }
}

/// What changed from `before` (read at its instant) to `now` (read at `at`).
fn changes(before: Option<&(Inspection, Instant)>, now: &Inspection, at: Instant) -> Vec<String> {
    let mut out = Vec::new();
    let Some((was, was_at)) = before else {
        // The first read: say what is there, nothing when it is free.
        if let Some(h) = &now.holder {
            out.push(format!("held by {}{}", holder::text(h), fence(now)));
        }
        if now.state.waiting > 0 {
            out.push(format!("{} waiting", now.state.waiting));
        }
        return out;
    };
    let s = &now.state;
    let w = &was.state;
    match (&was.holder, &now.holder) {
        (Some(_), None) => {
            // Gone: its lease running out explains it only if that much time passed.
            let lease_left = Duration::from_millis(w.ttl_ms.unwrap_or(0));
            if at.duration_since(*was_at) >= lease_left {
                out.push("expired (its lease ran out)".to_owned());
            } else {
                out.push("released".to_owned());
            }
        }
        (None, Some(h)) => out.push(format!("acquired by {}{}", holder::text(h), fence(now))),
        (Some(_), Some(h)) if w.fence != s.fence || w.owner != s.owner => {
            let next_in_line = was.waiters.first().map(|p| &p.owner);
            if next_in_line == s.owner.as_ref() {
                out.push(format!("handed over to {}{}", holder::text(h), fence(now)));
            } else {
                out.push(format!("acquired by {}{}", holder::text(h), fence(now)));
            }
        }
        (Some(_), Some(_)) if w.count != s.count => {
            out.push(format!("re-entry count {}", s.count));
        }
        _ => {}
    }
    if w.waiting != s.waiting {
        out.push(format!("{} waiting", s.waiting));
    }
    out
}

fn fence(seen: &Inspection) -> String {
    seen.state
        .fence
        .map_or(String::new(), |f| format!(" (fence {f})"))
}

/// The time of day, UTC, to the millisecond.
fn clock() -> String {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let day_ms = ms % 86_400_000;
    format!(
        "{:02}:{:02}:{:02}.{:03}",
        day_ms / 3_600_000,
        day_ms / 60_000 % 60,
        day_ms / 1000 % 60,
        day_ms % 1000
    )
}
