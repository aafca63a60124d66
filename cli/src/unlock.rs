//! `rlock unlock --force NAME`: the operator's way to free a stuck lock.
//! It goes through the release protocol, never a bare DEL: the first waiter
//! in line is handed the lock, or every waiter is woken, and the holder
//! hears that it lost the lock at its next renewal.

use std::io::{BufRead, IsTerminal, Write};

use clap::Args;

use crate::error::fail;
use crate::{exit, holder, Connection};

#[derive(Args, Debug)]
pub struct UnlockArgs {
    #[command(flatten)]
    connection: Connection,
    /// Required: the lock is taken from whoever holds it.
    #[arg(long)]
    force: bool,
    /// Do not ask for confirmation.
    #[arg(long, short = 'y')]
    yes: bool,
    /// The lock name.
    name: String,
}

pub async fn run(args: UnlockArgs) -> u8 {
    if !args.force {
        eprintln!("rlock: unlock takes the lock from its holder: say so with --force");
        return exit::USAGE;
    }
    let (client, seen) = match args.connection.inspect(&args.name).await {
        Ok(seen) => seen,
        Err(code) => return code,
    };
    let Some(party) = &seen.holder else {
        println!("{}: free", args.name);
        return 0;
    };
    if !args.yes {
        let stdin = std::io::stdin();
        if !stdin.is_terminal() {
            eprintln!("rlock: not a terminal to confirm on: pass --yes");
            return exit::USAGE;
        }
        eprint!("Free {} held by {}? [y/N] ", args.name, holder::text(party));
        let _ = std::io::stderr().flush();
        let mut answer = String::new();
        let _ = stdin.lock().read_line(&mut answer);
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            eprintln!("rlock: left as it is");
            return exit::USAGE;
        }
    }
    // The holding the operator saw and confirmed: one taken since is left alone.
    match client.force_unlock_seen(&seen).await {
        Ok(true) => {
            println!(
                "{}: released (was held by {})",
                args.name,
                holder::text(party)
            );
            0
        }
        Ok(false) => {
            println!("{}: left alone (that holding ended meanwhile)", args.name);
            0
        }
        Err(e) => fail(&e),
    }
}
