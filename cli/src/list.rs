//! `rlock list [PATTERN]`: the held locks under the prefix whose names match
//! PATTERN, one per line (or one JSON object per line), read a bounded SCAN
//! step at a time so that Redis serves others meanwhile.

use std::collections::HashSet;

use clap::Args;

use crate::error::fail;
use crate::Connection;

#[derive(Args, Debug)]
pub struct ListArgs {
    #[command(flatten)]
    connection: Connection,
    /// One JSON object per line: {"name", "held", "owner", "ttl_ms", "count",
    /// "fence", "fence_counter", "held_ms", "waiting"}.
    #[arg(long)]
    json: bool,
    /// A glob over lock names (`*`, `?`, `[...]`), always under the prefix.
    #[arg(default_value = "*")]
    pattern: String,
}

pub async fn run(args: ListArgs) -> u8 {
    let client = match args.connection.client().await {
        Ok(c) => c,
        Err(code) => return code,
    };
    let mut listing = match client.list(&args.pattern) {
        Ok(l) => l,
        Err(e) => return fail(&e),
    };
    // SCAN may name a key twice.
    let mut seen = HashSet::new();
    loop {
        let page = match listing.next_page().await {
            Ok(Some(page)) => page,
            Ok(None) => return 0,
            Err(e) => return fail(&e),
        };
        for l in page.into_iter().filter(|l| seen.insert(l.name.clone())) {
            let s = &l.state;
            if args.json {
                println!("{}", l.to_json());
            } else {
                let ttl = s.ttl_ms.map_or("no expiry".to_owned(), |ms| {
                    format!("ttl {:.1} s", ms as f64 / 1000.0)
                });
                let owner = s.owner.as_deref().unwrap_or("a key of another type");
                println!("{}\t{owner}\t{ttl}", l.name);
            }
        }
    }
}
