//! `rlock exec NAME CMD`: hold the lock while CMD runs.
//!
//! It takes flock(1)'s habits: `-n`, `-w SECS`, `-E CODE`, `-c COMMAND`, and
//! the command right after NAME, with or without `--`: rlock's options come
//! before NAME, and everything after it is the command's.
//!
//! The lock is taken before CMD starts and released after it ends. While CMD
//! runs the core's watchdog renews the lease; if the lease is lost anyway, CMD
//! is stopped (SIGTERM, then SIGKILL after a grace period), because it no
//! longer runs alone. SIGINT, SIGTERM and SIGHUP sent to rlock are forwarded to
//! CMD, and the lock is released once CMD has exited.

use std::ffi::OsString;
use std::process::ExitStatus;
use std::time::Duration;

use clap::Args;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use rlock_core::{validate, Error, Kind, Lock, LockArgs, LostReason, Unit};

use crate::command::{self, Signals};
use crate::error::fail;
use crate::{exit, Connection};

#[derive(Args, Debug)]
#[command(
    override_usage = "rlock exec [OPTIONS] NAME [--] CMD [ARGS]...\n       rlock exec [OPTIONS] -c COMMAND NAME"
)]
pub struct ExecArgs {
    #[command(flatten)]
    connection: Connection,
    /// Lease in seconds; renewed every ttl/3 while CMD runs.
    #[arg(long, value_name = "SECS", default_value_t = 30.0)]
    ttl: f64,
    /// Give up (exit 75, or -E's CODE) when the lock is not had within SECS.
    /// Default: wait forever.
    #[arg(
        short = 'w',
        long,
        visible_alias = "wait",
        value_name = "SECS",
        conflicts_with = "no_wait"
    )]
    timeout: Option<f64>,
    /// Make one attempt; exit 75 (or -E's CODE) at once when the lock is busy.
    #[arg(short = 'n', long, visible_alias = "nonblock")]
    no_wait: bool,
    /// The exit status when the lock is not acquired. 75 (EX_TEMPFAIL) by
    /// default, not flock's 1, which the command's own failure cannot be told
    /// from.
    #[arg(short = 'E', long, value_name = "CODE", default_value_t = exit::NOT_ACQUIRED)]
    conflict_exit_code: u8,
    /// Run COMMAND through `sh -c` instead of CMD [ARGS]...
    #[arg(short = 'c', long = "command", value_name = "COMMAND")]
    shell_command: Option<OsString>,
    /// After taking the lock, wait until K replicas have it; an acquisition
    /// fewer acknowledged is undone and retried.
    #[arg(long, value_name = "K")]
    sync_replicas: Option<u32>,
    /// Fair mode: wait in line (first come, first served); the lock is handed
    /// to the next waiter in line by each release. Not with several --url.
    #[arg(long)]
    fair: bool,
    /// When not fair: seconds a waiter competes for releases before it takes
    /// a place in that line (0: at once) [default: 0.01].
    #[arg(long, value_name = "SECS")]
    queue_after: Option<f64>,
    /// Take the read side of the read-write lock NAME (like flock -s): any
    /// number of --shared commands run together, none beside an --exclusive
    /// one. (Without -s, -x or --semaphore, NAME is a mutex of its own.)
    #[arg(short = 's', long, conflicts_with_all = ["exclusive", "semaphore"])]
    shared: bool,
    /// Take the write side of the read-write lock NAME (like flock -x):
    /// nobody else inside, no --shared command either.
    #[arg(short = 'x', long, conflicts_with = "semaphore")]
    exclusive: bool,
    /// Run under one of N permits of the semaphore NAME: at most N such
    /// commands at once (every user of NAME gives the same N).
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    semaphore: Option<i64>,
    /// Seconds between SIGTERM and SIGKILL when the lease is lost.
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    grace: f64,
    /// The lock name, then the command to run and its arguments, with or
    /// without `--` between them: everything after NAME is the command's
    /// (its own options too). With -c, NAME alone.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "NAME [--] CMD [ARGS]"
    )]
    words: Vec<OsString>,
}

/// The long flag of `rlock exec` nearest to the unknown `given` (the
/// core's choice, as for every face's misspelt option).
fn closest_flag(given: &str) -> Option<String> {
    let command = <ExecArgs as Args>::augment_args(clap::Command::new("exec"));
    let flags: Vec<&str> = command
        .get_arguments()
        .filter_map(|a| a.get_long())
        .collect();
    let given = given
        .trim_start_matches('-')
        .split('=')
        .next()
        .unwrap_or_default();
    rlock_core::closest_option(given, &flags).map(|f| format!("--{f}"))
}

/// The lock name and the command, as `rlock exec` (or `once`) was given them.
#[derive(Debug, PartialEq)]
pub(crate) struct Invocation {
    pub(crate) name: String,
    program: OsString,
    args: Vec<OsString>,
}

impl Invocation {
    /// Splits the words after the options into NAME and the command:
    /// `NAME [--] CMD [ARGS]...`, or with `-c COMMAND` NAME alone (or
    /// flock's `NAME -c COMMAND`).
    pub(crate) fn of(
        words: &[OsString],
        shell_command: Option<&OsString>,
    ) -> Result<Invocation, String> {
        let (name, rest) = words.split_first().ok_or("a lock name is needed")?;
        let name = name
            .to_str()
            .ok_or("the lock name must be valid UTF-8")?
            .to_owned();
        if name.starts_with('-') {
            // The options end at NAME, so an option rlock does not know
            // lands here.
            let near =
                closest_flag(&name).map_or(String::new(), |f| format!("did you mean '{f}'? "));
            return Err(format!(
                "unknown option '{name}' ({near}see rlock exec --help); a lock name cannot start with '-'"
            ));
        }
        let shell = |command: &OsString| Invocation {
            name: name.clone(),
            program: "sh".into(),
            args: vec!["-c".into(), command.clone()],
        };
        match (shell_command, rest) {
            (Some(command), []) => Ok(shell(command)),
            (Some(_), _) => Err("give either -c COMMAND or CMD [ARGS]..., not both".into()),
            (None, [flag, command]) if flag == "-c" || flag == "--command" => Ok(shell(command)),
            (None, rest) => {
                let command = match rest {
                    [dashes, command @ ..] if dashes == "--" => command,
                    _ => rest,
                };
                let (program, args) = command
                    .split_first()
                    .ok_or("no command to run: give CMD [ARGS]... after NAME, or -c COMMAND")?;
                Ok(Invocation {
                    name,
                    program: program.clone(),
                    args: args.to_vec(),
                })
            }
        }
    }
}

impl ExecArgs {
    /// The flags that are a lock's options, as the core takes them (checked
    /// there).
    fn lock_args(&self) -> LockArgs {
        LockArgs {
            ttl: Some(self.ttl),
            timeout: self.timeout,
            blocking: !self.no_wait,
            sync_replicas: self.sync_replicas.map(f64::from),
            fair: self.fair,
            queue_after: self.queue_after,
            ..LockArgs::new(Unit::Seconds)
        }
    }
}

pub async fn run(args: ExecArgs) -> u8 {
    let target = match Invocation::of(&args.words, args.shell_command.as_ref()) {
        Ok(t) => t,
        Err(problem) => {
            eprintln!("rlock: {problem}");
            return exit::USAGE;
        }
    };
    // Every argument is checked before any I/O.
    let checked = args.lock_args().check().and_then(|(options, wait)| {
        let grace = validate::span(args.grace, Unit::Seconds)
            .map_err(|problem| Error::invalid(format!("--grace {problem}")))?;
        validate::name(&target.name)?;
        if let Some(n) = args.semaphore {
            Kind::permits(n, 1)?;
        }
        Ok((options, wait, grace))
    });
    let (options, wait, grace) = match checked {
        Ok(c) => c,
        Err(e) => return fail(&e),
    };
    let (mut signals, client) = match args.connection.signals_and_client().await {
        Ok(both) => both,
        Err(code) => return code,
    };
    let name = &target.name;
    let lock = match (args.shared, args.exclusive, args.semaphore) {
        (true, _, _) => client.rw_lock(name, options).map(|rw| rw.read().clone()),
        (_, true, _) => client.rw_lock(name, options).map(|rw| rw.write().clone()),
        (_, _, Some(n)) => client.semaphore(name, n, options).map(|s| s.lock().clone()),
        _ => client.lock_with(name, options),
    };
    let lock = match lock {
        Ok(l) => l,
        Err(e) => return fail(&e),
    };
    // A signal while waiting ends the wait; dropping the acquire never leaves
    // a lock behind, and its place in line is left before rlock exits.
    let held = tokio::select! {
        held = lock.acquire(wait) => Ok(held),
        sig = signals.next() => Err(sig),
    };
    let held = match held {
        Ok(held) => held,
        Err(sig) => {
            command::settle(&client).await;
            return 128 + sig as u8;
        }
    };
    let held = match held {
        Ok(h) => h,
        Err(Error::Timeout { cause: None, .. } | Error::Busy { .. }) => {
            eprintln!(
                "rlock: lock {:?} is held by someone else; not running the command",
                target.name
            );
            return args.conflict_exit_code;
        }
        // Not acquired for another reason (a missed Redlock quorum, too few
        // replicas): the cause says which.
        Err(e @ Error::Timeout { .. }) => {
            eprintln!("rlock: {e}; not running the command");
            return args.conflict_exit_code;
        }
        Err(e) => return fail(&e),
    };
    match run_under(&lock, &target, held.fencing_token, grace, &mut signals).await {
        Ok(ran) => ended(lock.finish().await, ran),
        Err(code) => {
            let _ = lock.release().await;
            code
        }
    }
}

/// How CMD ended under a lock: rlock's exit status for it, and the reason
/// the lease was lost while it ran, if it was.
pub(crate) struct Ran {
    code: u8,
    lost: Option<LostReason>,
}

/// Runs CMD while `lock` is held (its fencing token in RLOCK_FENCING_TOKEN),
/// forwarding rlock's signals to it; if the lease is lost meanwhile, CMD
/// gets SIGTERM, then SIGKILL after `grace`. `Err` with rlock's exit status
/// when CMD could not be started (the caller ends the holding).
pub(crate) async fn run_under(
    lock: &Lock,
    target: &Invocation,
    fence: u64,
    grace: Duration,
    signals: &mut Signals,
) -> Result<Ran, u8> {
    let spawned = command::tied(&target.program, &target.args)
        .env("RLOCK_FENCING_TOKEN", fence.to_string())
        .spawn();
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            eprintln!("rlock: cannot run {:?}: {e}", target.program);
            return Err(command::not_started(&e));
        }
    };
    let pid = child.id().map(|id| Pid::from_raw(id as i32));
    let send = |sig: Signal| {
        if let Some(pid) = pid {
            let _ = kill(pid, sig);
        }
    };
    let lost = lock.lost_signal();
    tokio::pin!(lost);
    let mut lost_reason = None;
    let mut kill_at = None;
    let status: std::io::Result<ExitStatus> = loop {
        tokio::select! {
            status = child.wait() => break status,
            sig = signals.next() => send(sig),
            reason = &mut lost, if lost_reason.is_none() => {
                let Some(reason) = reason else { continue };
                let lost = Error::Lost { name: target.name.clone(), reason };
                eprintln!("rlock: {lost}; stopping the command");
                lost_reason = Some(reason);
                send(Signal::SIGTERM);
                kill_at = Some(tokio::time::Instant::now() + grace);
            }
            _ = sleep_until(kill_at), if kill_at.is_some() => {
                send(Signal::SIGKILL);
                kill_at = None;
            }
        }
    };
    let code = match status {
        Ok(s) => command::exit_code(s),
        Err(e) => {
            eprintln!("rlock: lost track of the command: {e}");
            exit::LOST
        }
    };
    Ok(Ran {
        code,
        lost: lost_reason,
    })
}

/// rlock's exit status once the holding CMD ran under has ended
/// (`finished`): CMD's own, or 70 when the lease was lost meanwhile.
pub(crate) fn ended(finished: rlock_core::Result<()>, ran: Ran) -> u8 {
    match finished {
        Ok(()) if ran.lost.is_none() => ran.code,
        Ok(()) => exit::LOST,
        Err(e @ Error::Lost { .. }) => {
            if ran.lost.is_none() {
                eprintln!("rlock: {e}");
            }
            exit::LOST
        }
        Err(e) => {
            // The command ran under the lock; a failed release only shortens
            // nothing (the lease ends on its own), so report and keep its status.
            eprintln!("rlock: release failed ({e}); the lease will expire on its own");
            ran.code
        }
    }
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(words: &[&str], shell: Option<&str>) -> Result<Invocation, String> {
        let words: Vec<OsString> = words.iter().map(OsString::from).collect();
        Invocation::of(&words, shell.map(OsString::from).as_ref())
    }

    fn runs(name: &str, program: &str, args: &[&str]) -> Result<Invocation, String> {
        Ok(Invocation {
            name: name.to_owned(),
            program: program.into(),
            args: args.iter().map(OsString::from).collect(),
        })
    }

    #[test]
    fn the_command_follows_name_with_or_without_dashes() {
        let echo = runs("job", "echo", &["-n", "hi"]);
        assert_eq!(of(&["job", "echo", "-n", "hi"], None), echo);
        assert_eq!(of(&["job", "--", "echo", "-n", "hi"], None), echo);
        assert_eq!(
            of(&["job", "--", "--", "x"], None),
            runs("job", "--", &["x"])
        );
        assert_eq!(of(&["job", "-n"], None), runs("job", "-n", &[]));
    }

    #[test]
    fn dash_c_runs_through_sh_before_name_or_in_flocks_place_after_it() {
        let shell = runs("job", "sh", &["-c", "a && b"]);
        assert_eq!(of(&["job"], Some("a && b")), shell);
        assert_eq!(of(&["job", "-c", "a && b"], None), shell);
        assert_eq!(of(&["job", "--command", "a && b"], None), shell);
        assert_eq!(
            of(&["job", "--", "-c", "a && b"], None),
            runs("job", "-c", &["a && b"])
        );
    }

    #[test]
    fn a_missing_or_doubled_command_and_an_unknown_option_are_refused() {
        for (words, shell) in [
            (&["job"][..], None),
            (&["job", "--"], None),
            (&["job", "true"], Some("true")),
            (&["-x", "job", "true"], None),
            (&[], None),
        ] {
            assert!(of(words, shell).is_err(), "{words:?} {shell:?}");
        }
    }
}
