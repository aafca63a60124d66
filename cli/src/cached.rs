//! `rlock cached KEY CMD`: the value of the cache entry KEY on stdout, from
//! the cache or, on a miss, from CMD's stdout, which one caller across every
//! process and face produces while the others wait for what it stores (the
//! core decides who: see `rlock_core::Cache`). `rlock invalidate KEY`
//! deletes the entry.
//!
//! A shell command cannot go on running once it has exited, so a refresh
//! (stale-while-revalidate, or an early refresh XFetch picked) runs in the
//! foreground: the current value is printed and stdout closed first, then
//! CMD runs and its value is stored before rlock exits.

use std::ffi::OsString;
use std::io::ErrorKind;
use std::os::unix::process::ExitStatusExt;
use std::process::{ExitStatus, Stdio};

use clap::Args;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use rlock_core::{validate, CacheArgs, Error, Read, Rebuild, Unit, BYTES};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use crate::command::{self, Signals};
use crate::error::fail;
use crate::{exit, Connection};

#[derive(Args, Debug)]
#[command(
    override_usage = "rlock cached [OPTIONS] --ttl SECS KEY [--] CMD [ARGS]...\n       rlock cached [OPTIONS] --ttl SECS -c COMMAND KEY"
)]
pub struct CachedArgs {
    #[command(flatten)]
    connection: Connection,
    /// Seconds a value stays fresh, less a random share of them (--jitter).
    #[arg(long, value_name = "SECS", allow_negative_numbers = true)]
    ttl: f64,
    /// Seconds after the ttl during which the old value is still printed at
    /// once, while one caller refreshes it [default: none: wait for the new
    /// value].
    #[arg(long, value_name = "SECS", allow_negative_numbers = true)]
    stale: Option<f64>,
    /// Seconds an entry for "nothing found" (--none-exit) is kept [default:
    /// 10, or --ttl if shorter].
    #[arg(long, value_name = "SECS", allow_negative_numbers = true)]
    none_ttl: Option<f64>,
    /// The largest share of --ttl taken off at random, from 0 to below 1, so
    /// entries filled together do not expire together [default: 0.1].
    #[arg(long, value_name = "F", allow_negative_numbers = true)]
    jitter: Option<f64>,
    /// Early refresh (XFetch's beta): the larger, the sooner before expiry
    /// one caller refreshes a value; 0: never early [default: 1].
    #[arg(long, value_name = "F", allow_negative_numbers = true)]
    early: Option<f64>,
    /// Give up (exit 75) when another caller's rebuild has not stored a value
    /// within SECS [default: wait as long as it takes].
    #[arg(long, value_name = "SECS", allow_negative_numbers = true)]
    timeout: Option<f64>,
    /// When the rebuild this caller waited for fails: `share` (exit 70 with
    /// its message) or `retry` (one of the waiters rebuilds next) [default:
    /// share].
    #[arg(long, value_name = "WHAT")]
    on_error: Option<String>,
    /// The rebuild lock's lease in seconds, renewed while CMD runs [default:
    /// 30].
    #[arg(long, value_name = "SECS", allow_negative_numbers = true)]
    lock_ttl: Option<f64>,
    /// CMD exiting CODE means "nothing found": nothing is printed, rlock
    /// exits CODE, and so does every caller until --none-ttl passes (else
    /// any status but 0 is a failure, and an entry another program stored as
    /// "nothing found" exits 66).
    #[arg(long, value_name = "CODE", value_parser = clap::value_parser!(u8).range(1..))]
    none_exit: Option<u8>,
    /// Run COMMAND through `sh -c` instead of CMD [ARGS]...
    #[arg(short = 'c', long = "command", value_name = "COMMAND")]
    shell_command: Option<OsString>,
    /// The cache key.
    key: String,
    /// The command that prints the value, with or without `--` before it:
    /// every word from CMD on is the command's, its own options too.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD [ARGS]",
        required_unless_present = "shell_command",
        conflicts_with = "shell_command"
    )]
    cmd: Vec<OsString>,
}

#[derive(Args, Debug)]
pub struct InvalidateArgs {
    #[command(flatten)]
    connection: Connection,
    /// The cache key.
    key: String,
}

impl CachedArgs {
    /// The flags that are the entry's options, as the core takes them
    /// (checked there).
    fn cache_args(&self) -> CacheArgs {
        CacheArgs {
            ttl: Some(self.ttl),
            stale: self.stale,
            none_ttl: self.none_ttl,
            jitter: self.jitter,
            early: self.early,
            timeout: self.timeout,
            on_error: self.on_error.clone(),
            lock_ttl: self.lock_ttl,
            ..CacheArgs::new(Unit::Seconds)
        }
    }

    /// What runs on a miss.
    fn rebuilder(&self) -> Rebuilder {
        let (program, args, label) = match (&self.shell_command, self.cmd.split_first()) {
            (Some(c), _) => ("sh".into(), vec!["-c".into(), c.clone()], c.clone()),
            (None, Some((program, args))) => {
                (program.clone(), args.to_vec(), self.cmd.join(" ".as_ref()))
            }
            (None, None) => unreachable!("clap requires CMD or -c"),
        };
        Rebuilder {
            program,
            args,
            label: shortened(&label.to_string_lossy(), 80),
            none_exit: self.none_exit,
        }
    }
}

pub async fn run(args: CachedArgs) -> u8 {
    // Every argument is checked before any I/O.
    let checked = args
        .cache_args()
        .check()
        .and_then(|options| validate::cache_key(&args.key).map(|()| options))
        .and_then(|options| args.connection.for_cache().map(|()| options));
    let options = match checked {
        Ok(o) => o,
        Err(e) => return fail(&e),
    };
    let rebuilder = args.rebuilder();
    let nothing_found = args.none_exit.unwrap_or(exit::NOTHING_FOUND);
    let (mut signals, client) = match args.connection.signals_and_client().await {
        Ok(both) => both,
        Err(code) => return code,
    };
    let cache = match client.cache(&args.key, options) {
        Ok(c) => c,
        Err(e) => return fail(&e),
    };
    // A signal while waiting for another caller's rebuild ends the wait;
    // a rebuild lock this caller had taken is given back by the core.
    let read = tokio::select! {
        read = cache.read() => Ok(read),
        sig = signals.next() => Err(sig),
    };
    let read = match read {
        Ok(read) => read,
        Err(sig) => {
            command::settle(&client).await;
            return 128 + sig as u8;
        }
    };
    match read {
        Ok(Read::Hit(entry)) => print(entry.value.as_deref(), nothing_found).await,
        Ok(Read::Load(rebuild)) => match rebuilder.run(rebuild, &mut signals).await {
            Ok(Rebuilt::Value(value)) => print(value.as_deref(), nothing_found).await,
            Ok(Rebuilt::Failed { code, .. }) => code,
            Err(e) => fail(&e),
        },
        Ok(Read::Refresh(entry, rebuild)) => {
            let printed = print(entry.value.as_deref(), nothing_found).await;
            // The caller has its value: a reader of the pipe sees its end
            // now, not after the refresh.
            close_stdout();
            match rebuilder.run(rebuild, &mut signals).await {
                Ok(Rebuilt::Value(_)) => {}
                Ok(Rebuilt::Failed { message, .. }) => {
                    eprintln!(
                        "rlock: cache entry {:?}: refresh failed: {message}",
                        args.key
                    )
                }
                Err(e) => {
                    eprintln!("rlock: cache entry {:?}: refresh failed: {e}", args.key)
                }
            }
            printed
        }
        Err(Error::Timeout { .. }) => {
            eprintln!(
                "rlock: cache entry {:?}: another caller's rebuild stored no value within --timeout",
                args.key
            );
            exit::NOT_ACQUIRED
        }
        Err(e) => fail(&e),
    }
}

pub async fn invalidate(args: InvalidateArgs) -> u8 {
    if let Err(e) = validate::cache_key(&args.key).and_then(|()| args.connection.for_cache()) {
        return fail(&e);
    }
    let client = match args.connection.client().await {
        Ok(c) => c,
        Err(code) => return code,
    };
    // Whether there was an entry is nobody's concern: either way there is
    // none now.
    match client.invalidate(&args.key).await {
        Ok(_) => 0,
        Err(e) => fail(&e),
    }
}

/// The command that rebuilds the entry, and how its end reads.
struct Rebuilder {
    program: OsString,
    args: Vec<OsString>,
    /// CMD (or -c's COMMAND) as the failure a waiter gets names it.
    label: String,
    none_exit: Option<u8>,
}

/// Whether CMD ended by a signal that stops a program on request (the ones
/// rlock forwards from a terminal or a service manager).
fn cancelled(status: ExitStatus) -> bool {
    use std::os::unix::process::ExitStatusExt;
    matches!(
        status.signal(),
        Some(libc_signal) if [nix::sys::signal::Signal::SIGINT, nix::sys::signal::Signal::SIGTERM, nix::sys::signal::Signal::SIGHUP]
            .iter()
            .any(|s| *s as i32 == libc_signal)
    )
}

/// What a run of CMD gave.
enum Rebuilt {
    /// Stored (or not, when a newer value or an invalidation overtook it):
    /// this caller's value either way; `None`: nothing found.
    Value(Option<Vec<u8>>),
    /// Nothing stored; the waiters get `message`, rlock exits `code`.
    Failed { code: u8, message: String },
}

/// How CMD ended.
struct Ran {
    status: std::io::Result<ExitStatus>,
    stdout: std::io::Result<Vec<u8>>,
    /// The last line CMD wrote to stderr, for the waiters' message.
    last_line: String,
}

impl Rebuilder {
    /// Runs CMD and stores its stdout (exit 0) or "nothing found"
    /// (--none-exit), or tells the waiters it failed.
    async fn run(&self, rebuild: Rebuild, signals: &mut Signals) -> rlock_core::Result<Rebuilt> {
        let child = command::tied(&self.program, &self.args)
            .env("RLOCK_FENCING_TOKEN", rebuild.fence().to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn();
        let child = match child {
            Ok(c) => c,
            Err(e) => {
                let message = format!("cannot run {:?}: {e}", self.label);
                eprintln!("rlock: {message}");
                rebuild.fail(&message).await?;
                let code = command::not_started(&e);
                return Ok(Rebuilt::Failed { code, message });
            }
        };
        let Ran {
            status,
            stdout,
            last_line,
        } = self.watch(child, signals).await;
        let (status, stdout) = match status.and_then(|s| Ok((s, stdout?))) {
            Ok(ended) => ended,
            Err(e) => {
                let message = format!("lost track of {:?}: {e}", self.label);
                eprintln!("rlock: {message}");
                rebuild.fail(&message).await?;
                return Ok(Rebuilt::Failed {
                    code: exit::LOST,
                    message,
                });
            }
        };
        let value = if status.success() {
            Some(stdout)
        } else if self
            .none_exit
            .is_some_and(|n| status.code() == Some(i32::from(n)))
        {
            None
        } else {
            let message = self.failure(status, &last_line);
            if cancelled(status) {
                // Stopped, not failed (Ctrl-C, a service stop): nothing to
                // report to the waiters, one of whom rebuilds next.
                rebuild.abandon().await;
            } else {
                rebuild.fail(&message).await?;
            }
            let code = command::exit_code(status);
            return Ok(Rebuilt::Failed { code, message });
        };
        // Whether it was written or overtaken (a newer value, an
        // invalidation), the value is what this caller asked for.
        rebuild.store(value.as_deref(), BYTES).await?;
        Ok(Rebuilt::Value(value))
    }

    /// Waits for CMD to end, its stdout read to its end, its stderr passed
    /// on, and rlock's signals forwarded to it.
    async fn watch(&self, mut child: tokio::process::Child, signals: &mut Signals) -> Ran {
        let pid = child.id().map(|id| Pid::from_raw(id as i32));
        let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
        let ended = async { tokio::join!(child.wait(), read_all(stdout), pass_on(stderr)) };
        tokio::pin!(ended);
        loop {
            tokio::select! {
                (status, stdout, last_line) = &mut ended => {
                    return Ran { status, stdout, last_line };
                }
                sig = signals.next() => {
                    if let Some(pid) = pid {
                        let _ = kill(pid, sig);
                    }
                }
            }
        }
    }

    /// What the waiters of a failed rebuild are told.
    fn failure(&self, status: ExitStatus, last_line: &str) -> String {
        let ended = match (status.code(), status.signal()) {
            (Some(code), _) => format!("exited with status {code}"),
            (None, Some(n)) => match Signal::try_from(n) {
                Ok(sig) => format!("was killed by {sig}"),
                Err(_) => format!("was killed by signal {n}"),
            },
            (None, None) => "ended".to_owned(),
        };
        match last_line {
            "" => format!("{:?} {ended}", self.label),
            line => format!("{:?} {ended}: {line}", self.label),
        }
    }
}

/// Prints a value as stored, whatever face stored it and in whatever
/// format: rlock's exit status (`nothing_found`'s for "nothing found").
async fn print(value: Option<&[u8]>, nothing_found: u8) -> u8 {
    let Some(value) = value else {
        return nothing_found;
    };
    let mut out = tokio::io::stdout();
    let written = match out.write_all(value).await {
        Ok(()) => out.flush().await,
        Err(e) => Err(e),
    };
    match written {
        Ok(()) => 0,
        // As a filter killed by SIGPIPE: the reader left (`| head -c1`).
        Err(e) if e.kind() == ErrorKind::BrokenPipe => 128 + Signal::SIGPIPE as u8,
        Err(e) => {
            eprintln!("rlock: cannot write the value to stdout: {e}");
            exit::IO_ERROR
        }
    }
}

/// Everything CMD prints on stdout.
async fn read_all(from: Option<impl AsyncRead + Unpin>) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    if let Some(mut from) = from {
        from.read_to_end(&mut out).await?;
    }
    Ok(out)
}

/// How much of CMD's stderr is kept to find its last line.
const STDERR_TAIL: usize = 4096;

/// Copies CMD's stderr to rlock's as it comes; the last line that is not
/// blank, for the waiters' message.
async fn pass_on(from: Option<impl AsyncRead + Unpin>) -> String {
    let Some(mut from) = from else {
        return String::new();
    };
    let mut to = tokio::io::stderr();
    let mut tail: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 8192];
    loop {
        let n = match from.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        // rlock's own stderr gone is no reason to stop reading CMD's.
        let _ = to.write_all(&chunk[..n]).await;
        tail.extend_from_slice(&chunk[..n]);
        if tail.len() > STDERR_TAIL {
            tail.drain(..tail.len() - STDERR_TAIL);
        }
    }
    let _ = to.flush().await;
    let text = String::from_utf8_lossy(&tail);
    let line = text.lines().rev().find(|l| !l.trim().is_empty());
    shortened(line.unwrap_or("").trim(), 200)
}

/// `text` cut to at most `max` characters, marked when cut.
fn shortened(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// Points stdout at /dev/null, so that a reader at the other end of a pipe
/// sees its end while rlock refreshes the entry. (Not a bare close: the
/// next descriptor opened would become number 1.)
fn close_stdout() {
    if let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") {
        let _ = nix::unistd::dup2_stdout(&null);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_text_is_cut_on_a_character_boundary() {
        assert_eq!(shortened("abc", 3), "abc");
        assert_eq!(shortened("abcd", 3), "abc…");
        assert_eq!(shortened("ééé", 2), "éé…");
    }
}
