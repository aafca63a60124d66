//! `rlock status NAME`: the lock's state, as text or one JSON object.

use clap::Args;

use crate::error::fail;
use crate::Connection;

#[derive(Args, Debug)]
pub struct StatusArgs {
    #[command(flatten)]
    connection: Connection,
    /// Print one JSON object: {"name", "held", "ttl_ms", "count", "fence", "fence_counter"}.
    #[arg(long)]
    json: bool,
    /// The lock name.
    name: String,
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
    let state = match client.lock(&args.name) {
        Ok(lock) => lock.state().await,
        Err(e) => Err(e),
    };
    let state = match state {
        Ok(s) => s,
        Err(e) => return fail(&e),
    };
    if args.json {
        let out = serde_json::json!({
            "name": args.name,
            "held": state.held,
            "ttl_ms": state.ttl_ms,
            "count": state.count,
            "fence": state.fence,
            "fence_counter": state.fence_counter,
        });
        println!("{out}");
    } else if state.held {
        let ttl = state.ttl_ms.map_or("no expiry".to_owned(), |ms| {
            format!("ttl {:.1} s", ms as f64 / 1000.0)
        });
        let fence = state.fence.map_or("none".to_owned(), |f| f.to_string());
        println!(
            "{}: held ({ttl}, count {}, fence {fence})",
            args.name, state.count
        );
    } else {
        // No token shown: the fence counter is its slot's, shared with other
        // names, so its value would read as this name's last token, which it
        // need not be (the JSON form keeps it, documented as the slot's).
        println!("{}: free", args.name);
    }
    0
}
