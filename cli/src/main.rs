//! `rlock`: run a command under a Redis lock (like flock(1), across machines),
//! show a lock's state, or cache a command's output with one run per miss
//! across every caller. Every decision about locking and caching is the
//! core's.

mod cached;
mod command;
mod error;
mod exec;
mod exit;
mod holder;
mod list;
mod once;
mod status;
mod unlock;
mod watch;

use std::process::ExitCode;

use clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand;
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

use rlock_core::{Client, ClientOptions, Error};

#[derive(Parser)]
#[command(name = "rlock", version, about = "Redis distributed lock: run a command while holding it, inspect it, or cache a command's output", after_help = exit::TABLE)]
struct Cli {
    /// Log to stderr: -v lost leases, failed renewals and reconnects; -vv
    /// each operation too.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Take the lock NAME, run CMD while holding it (renewed while CMD runs), release it.
    #[command(after_help = exit::TABLE)]
    Exec(exec::ExecArgs),
    /// Run CMD as a run-once job: on the one machine that takes NAME first, the
    /// others skipping it at once; nobody runs it again until --at-least seconds
    /// after it started.
    #[command(after_help = exit::TABLE)]
    Once(once::OnceArgs),
    /// Show whether NAME is held, its remaining lease, re-entry count and fencing token.
    #[command(after_help = exit::TABLE)]
    Status(status::StatusArgs),
    /// Print the cached value of KEY; on a miss one caller across every
    /// process runs CMD, stores its stdout for --ttl seconds and prints it,
    /// while the others wait for that value.
    #[command(after_help = exit::TABLE)]
    Cached(cached::CachedArgs),
    /// Delete the cache entry KEY, so that the next `rlock cached KEY` runs CMD.
    #[command(after_help = exit::TABLE)]
    Invalidate(cached::InvalidateArgs),
    /// List the held locks under the prefix whose names match PATTERN, with holder and lease.
    #[command(after_help = exit::TABLE)]
    List(list::ListArgs),
    /// Free the lock NAME whoever holds it, as its holder's release would (--force required).
    #[command(after_help = exit::TABLE)]
    Unlock(unlock::UnlockArgs),
    /// Follow the lock NAME until Ctrl-C: acquired, released, handed over, expired, waiters.
    #[command(after_help = exit::TABLE)]
    Watch(watch::WatchArgs),
}

/// Where the lock lives.
#[derive(Args, Debug)]
pub struct Connection {
    /// Redis URL: redis://, rediss:// (TLS), user:password@, /db, or
    /// redis+sentinel://host:port[,host:port]/service[/db]. Repeat it for a
    /// Redlock over independent masters (the lock is held on a majority), or
    /// with --cluster for the seed nodes of one Redis Cluster. Default:
    /// $REDIS_URL, else redis://127.0.0.1:6379.
    #[arg(long, value_name = "URL")]
    url: Vec<String>,
    /// The --url servers are seed nodes of one Redis Cluster.
    #[arg(long)]
    cluster: bool,
    /// PEM file of the CA that signed the servers' certificates (rediss:// with a private CA).
    #[arg(long, value_name = "FILE")]
    tls_ca: Option<PathBuf>,
    /// Key prefix (keys are PREFIX:{NAME}).
    #[arg(long, value_name = "P", default_value = rlock_core::DEFAULT_PREFIX)]
    prefix: String,
}

impl Connection {
    /// The client, or the exit status its failure was reported with.
    async fn client(&self) -> Result<Client, u8> {
        self.connect().await.map_err(|e| error::fail(&e))
    }

    /// What a command run under a lock needs first: the signals it
    /// forwards to the command, then the client; or the exit status of the
    /// failure of either.
    async fn signals_and_client(&self) -> Result<(command::Signals, Client), u8> {
        let signals = command::Signals::new().map_err(|e| {
            eprintln!("rlock: cannot handle signals: {e}");
            exit::LOST
        })?;
        Ok((signals, self.client().await?))
    }

    /// The client of a subcommand about the lock `name`: a bad name is a
    /// usage error, before any I/O (not a connection error).
    async fn client_for(&self, name: &str) -> Result<Client, u8> {
        rlock_core::validate::name(name).map_err(|e| error::fail(&e))?;
        self.client().await
    }

    /// A cache needs one deployment: several `--url` without `--cluster`
    /// (a Redlock) are refused before any I/O.
    fn for_cache(&self) -> rlock_core::Result<()> {
        rlock_core::validate::cache_servers(self.url.len(), self.cluster)
    }

    /// What inspection sees of the lock `name` now, and the client that
    /// read it.
    async fn inspect(&self, name: &str) -> Result<(Client, rlock_core::Inspection), u8> {
        let client = self.client_for(name).await?;
        let seen = client.inspect(name).await.map_err(|e| error::fail(&e))?;
        Ok((client, seen))
    }

    async fn connect(&self) -> rlock_core::Result<Client> {
        let urls = match self.url.as_slice() {
            [] => vec![Client::default_url()],
            given => given.to_vec(),
        };
        let tls_ca = match &self.tls_ca {
            Some(path) => Some(std::fs::read(path).map_err(|e| {
                Error::invalid(format!("cannot read --tls-ca {}: {e}", path.display()))
            })?),
            None => None,
        };
        let options = ClientOptions::default()
            .prefix(&self.prefix)
            .cluster(self.cluster)
            .tls_ca_pem(tls_ca)
            .face("cli");
        Client::connect_urls(&urls, options).await
    }
}

fn main() -> ExitCode {
    std::panic::set_hook(Box::new(|info| {
        eprintln!("rlock: internal error: {info}");
        std::process::exit(i32::from(exit::LOST));
    }));
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // --help, --version, and the help a bare `rlock` gets.
        Err(e) if !e.use_stderr() || e.kind() == DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { exit::USAGE } else { 0 });
        }
        Err(e) => {
            eprintln!("rlock: {}", usage_error(&e.render().to_string()));
            return ExitCode::from(exit::USAGE);
        }
    };
    if cli.verbose > 0 {
        log_to_stderr(cli.verbose);
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("rlock: cannot start: {e}");
            return ExitCode::from(exit::LOST);
        }
    };
    let code = runtime.block_on(async {
        match cli.command {
            Command::Exec(args) => exec::run(args).await,
            Command::Once(args) => once::run(args).await,
            Command::Status(args) => status::run(args).await,
            Command::Cached(args) => cached::run(args).await,
            Command::Invalidate(args) => cached::invalidate(args).await,
            Command::List(args) => list::run(args).await,
            Command::Unlock(args) => unlock::run(args).await,
            Command::Watch(args) => watch::run(args).await,
        }
    });
    ExitCode::from(code)
}

/// clap's report of a bad command line, which spans several lines
/// (`error: ...`, its tips, the usage, where to read more), as one line
/// like every other error of `rlock`: the error, its tips, the usage.
fn usage_error(rendered: &str) -> String {
    let mut parts = Vec::new();
    let mut usage = None;
    for paragraph in rendered.split("\n\n") {
        let text = paragraph
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join(" ");
        if let Some(error) = text.strip_prefix("error: ") {
            parts.push(error.to_owned());
        } else if let Some(u) = text.strip_prefix("Usage: ") {
            usage = Some(u.to_owned());
        } else if text.starts_with("tip: ") {
            parts.push(text);
        }
    }
    // Where to read more: the subcommand's own help, when the usage names it.
    let command = usage
        .as_deref()
        .and_then(|u| u.split([' ', '[', '<']).nth(1).filter(|w| !w.is_empty()))
        .map_or("rlock".to_owned(), |sub| format!("rlock {sub}"));
    if let Some(usage) = usage {
        parts.push(format!("usage: {usage}"));
    }
    format!("{} (more: {command} --help)", parts.join("; "))
}

/// The core's events on stderr (the commands' own output stays on stdout).
fn log_to_stderr(verbose: u8) {
    use tracing_subscriber::filter::{LevelFilter, Targets};
    use tracing_subscriber::prelude::*;
    let level = if verbose > 1 {
        LevelFilter::DEBUG
    } else {
        LevelFilter::INFO
    };
    let _ = tracing_subscriber::registry()
        .with(tracing_subscriber::fmt::layer().with_writer(std::io::stderr))
        .with(Targets::new().with_target("rlock", level))
        .try_init();
}
