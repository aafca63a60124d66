//! What a client writes about itself in Redis, so that inspection can say
//! who holds a lock: host, pid, command line, face and version under
//! `P:client:{ID}` (see `core/lua/client/register.lua`). Written once when the client
//! connects, then renewed only while the client has something to show: by
//! the watchdog's tick beside the renewals it sends anyway, and by an
//! acquisition or a waiter's attempt when the last write is `RENEW_EVERY`
//! old (the write then goes in the background, never on the lock cycle's
//! path). An idle client sends nothing, and its registration lapses until
//! it locks again; a dead one's ends with its lease. Deleted when the
//! client closes.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use crate::redis::deployment::Deployment;
use crate::telemetry::Telemetry;

/// How long a registration outlives the last renewal of its client.
pub const REGISTRATION_LEASE: Duration = Duration::from_secs(30);
/// A registration last written this long ago is written again at the next
/// chance; a third of the lease, as the watchdog renews a lock.
pub const RENEW_EVERY: Duration = Duration::from_secs(10);
/// A registration this close to `RENEW_EVERY` old counts as due: the
/// watchdog wakes `RENEW_EVERY` after its last wake, and the write it
/// started then was stamped a moment after that wake.
const DUE_EARLY: Duration = Duration::from_secs(1);
/// A write that failed is tried again this long after (less than
/// `RENEW_EVERY - DUE_EARLY`).
const RETRY_AFTER: Duration = Duration::from_secs(1);
const NEVER: u64 = u64::MAX;
/// A command line is cut to this many bytes.
const MAX_PROCESS_BYTES: usize = 256;

/// The registration of one client.
pub(crate) struct Registration {
    key: String,
    id: String,
    fields: Vec<(&'static str, String)>,
    /// When it was last written, in ms after `base` (`NEVER`: not yet).
    base: Instant,
    written_ms: AtomicU64,
    /// A write is on its way: a second one would add nothing.
    writing: AtomicBool,
}

impl Registration {
    /// `face` says which package the client came from ("python 3.11.4");
    /// the process is named by its program and, for an interpreter, its
    /// script (never the rest of the command line, where secrets go), and
    /// without the passwords in `deployment`'s URLs (or any URL's).
    pub(crate) fn new(key: String, id: String, face: &str, deployment: &Deployment) -> Self {
        let args: Vec<String> = std::env::args().collect();
        let process = hide_url_password(&process_name(&args));
        let process = cut(deployment.scrub(process), MAX_PROCESS_BYTES);
        Registration {
            key,
            id,
            fields: vec![
                ("host", host_name()),
                ("pid", std::process::id().to_string()),
                ("process", process),
                ("face", face.to_owned()),
                ("version", env!("CARGO_PKG_VERSION").to_owned()),
            ],
            base: Instant::now(),
            written_ms: AtomicU64::new(NEVER),
            writing: AtomicBool::new(false),
        }
    }

    /// Whether it is time to write it again (and no write is on its way).
    pub(crate) fn due(&self) -> bool {
        if self.writing.load(Ordering::Relaxed) {
            return false;
        }
        match self.written_ms.load(Ordering::Relaxed) {
            NEVER => true,
            ms => {
                self.base
                    .elapsed()
                    .saturating_sub(Duration::from_millis(ms))
                    >= RENEW_EVERY - DUE_EARLY
            }
        }
    }

    /// Writes or renews it; someone else's data in its key is reported
    /// (once per client) and left alone.
    pub(crate) async fn renew(&self, deployment: &Deployment, telemetry: &Telemetry) {
        if self.writing.swap(true, Ordering::Relaxed) {
            return;
        }
        // Cleared however this ends, a future dropped at shutdown included.
        let _writing = Writing(&self.writing);
        let started = self.base.elapsed().as_millis() as u64;
        let lease_ms = REGISTRATION_LEASE.as_millis() as u64;
        match deployment
            .register(&self.key, lease_ms, &self.id, &self.fields)
            .await
        {
            Ok(true) => self.written_ms.store(started, Ordering::Relaxed),
            Ok(false) => {
                // Tried again only a lease later: the key is not ours.
                self.written_ms.store(started, Ordering::Relaxed);
                telemetry.foreign_registration(&self.key);
            }
            Err(e) => {
                // Tried again a second from now, not at every attempt meanwhile.
                let retry_at = started
                    .saturating_sub((RENEW_EVERY - DUE_EARLY - RETRY_AFTER).as_millis() as u64);
                self.written_ms.store(retry_at, Ordering::Relaxed);
                tracing::debug!(target: "rlock", error = %e, "registration not renewed");
            }
        }
    }

    /// Deletes it (the client closes); left to its lease when Redis does
    /// not answer.
    pub(crate) async fn remove(&self, deployment: &Deployment) {
        let _ = deployment
            .register(&self.key, 0, &self.id, &self.fields)
            .await;
    }
}

struct Writing<'a>(&'a AtomicBool);

impl Drop for Writing<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Relaxed);
    }
}

/// This machine's name, as a registration gives it.
pub(crate) fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .or_else(|| std::env::var("COMPUTERNAME").ok())
        .unwrap_or_else(|| "unknown".to_owned())
}

/// `scheme://user:secret@host` → `scheme://user:***@host`, wherever a URL
/// sits in `text`.
fn hide_url_password(text: &str) -> String {
    let Some(start) = text.find("://").map(|i| i + 3) else {
        return text.to_owned();
    };
    let rest = &text[start..];
    let authority_end = rest.find(['/', ' ']).unwrap_or(rest.len());
    let Some(at) = rest[..authority_end].rfind('@') else {
        return text.to_owned();
    };
    let Some(colon) = rest[..at].find(':') else {
        return text.to_owned();
    };
    format!(
        "{}{}***{}",
        &text[..start],
        &rest[..=colon],
        hide_url_password(&rest[at..])
    )
}

/// The program's file name; for an interpreter (`python3`, `node`, `bash`),
/// also its module or script file: `python3 worker.py`, `python3 -m celery`,
/// `bash backup.sh`. Never code from the command line: an interpreter given
/// code (`-c`, `-e`, `-p`, `--eval`, `--print`, `-r`, or such a letter in a
/// cluster of short flags like `-pe`) is named by the program and that flag
/// alone, and an argument counts as the script only when it names a file
/// (code that a flag of some interpreter not listed here brings is never a
/// file name of this process).
fn process_name(args: &[String]) -> String {
    let base = |a: &str| a.rsplit('/').next().unwrap_or(a).to_owned();
    let Some(program) = args.first().map(|a| base(a)) else {
        return String::new();
    };
    if !is_interpreter(&program) {
        return program;
    }
    let mut rest = args[1..].iter();
    while let Some(a) = rest.next() {
        match a.as_str() {
            "-m" => return format!("{program} -m {}", rest.next().map_or("", |m| m.as_str())),
            "--" => continue,
            flag if brings_code(flag) => return format!("{program} {}", flag_name(flag)),
            flag if flag.starts_with('-') => continue,
            script if std::path::Path::new(script).is_file() => {
                return format!("{program} {}", base(script))
            }
            _ => continue,
        }
    }
    program
}

/// Interpreters whose first file argument is the script they run.
fn is_interpreter(program: &str) -> bool {
    const INTERPRETERS: [&str; 15] = [
        "python", "node", "nodejs", "ruby", "perl", "php", "deno", "bun", "sh", "bash", "dash",
        "zsh", "ksh", "fish", "lua",
    ];
    // `python3.11`, `node20`: a version after the name.
    let name = program.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    INTERPRETERS.contains(&name)
}

/// Whether a flag brings code from the command line: `--eval`, `--print`,
/// `--command`, or a short flag (or cluster of them, `-pe`, `-xc`) with one
/// of the letters that mean code in some interpreter: `c` (python, sh),
/// `e`/`E` (node, perl, ruby), `p` (node --print), `r` (php).
fn brings_code(flag: &str) -> bool {
    if let Some(long) = flag.strip_prefix("--") {
        let long = long.split('=').next().unwrap_or(long);
        return matches!(long, "eval" | "print" | "command" | "exec");
    }
    match flag.strip_prefix('-') {
        Some(short) if !short.is_empty() => short
            .chars()
            .take_while(|c| c.is_ascii_alphabetic())
            .any(|c| matches!(c, 'c' | 'e' | 'E' | 'p' | 'r')),
        _ => false,
    }
}

/// A flag as shown: never what follows the letter that brings code, which
/// may be the code itself (`--eval=CODE`, `-eCODE`; `-pe` shows as `-p`).
fn flag_name(flag: &str) -> &str {
    if flag.starts_with("--") {
        return flag.split('=').next().unwrap_or(flag);
    }
    let code_at = flag[1..]
        .find(['c', 'e', 'E', 'p', 'r'])
        .map_or(flag.len(), |i| i + 2);
    &flag[..code_at]
}

fn cut(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_password_is_hidden_and_the_rest_kept() {
        assert_eq!(
            hide_url_password("--url=redis://app:s3cret@db:6379/0"),
            "--url=redis://app:***@db:6379/0"
        );
        assert_eq!(hide_url_password("redis://:pw@a:1"), "redis://:***@a:1");
        assert_eq!(hide_url_password("redis://db:6379"), "redis://db:6379");
        assert_eq!(hide_url_password("plain"), "plain");
    }

    #[test]
    fn a_process_is_named_by_its_program_and_script_never_its_arguments() {
        let dir = std::env::temp_dir().join(format!("rlock-registration-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = |name: &str| {
            let path = dir.join(name);
            std::fs::write(&path, "").unwrap();
            path.to_str().unwrap().to_owned()
        };
        let (worker, server, backup) = (file("worker.py"), file("server.js"), file("backup.sh"));
        let name =
            |args: &[&str]| process_name(&args.iter().map(|a| a.to_string()).collect::<Vec<_>>());
        assert_eq!(
            name(&["/usr/bin/rlock", "exec", "--url", "redis://:pw@h"]),
            "rlock"
        );
        assert_eq!(
            name(&["/usr/bin/python3", "-u", &worker, "--token", "t"]),
            "python3 worker.py"
        );
        assert_eq!(
            name(&["python3.11", "-m", "celery", "worker", "--password=x"]),
            "python3.11 -m celery"
        );
        assert_eq!(
            name(&["node", "--inspect", &server, "secret"]),
            "node server.js"
        );
        assert_eq!(name(&["bash", "-x", &backup, "s3cret"]), "bash backup.sh");
        assert_eq!(name(&["/bin/sh", &backup]), "sh backup.sh");
        assert_eq!(name(&[]), "");
        assert_eq!(name(&["node", "does-not-exist.js"]), "node");
    }

    #[test]
    fn code_from_the_command_line_is_never_kept_only_the_flag_that_brought_it() {
        let name =
            |args: &[&str]| process_name(&args.iter().map(|a| a.to_string()).collect::<Vec<_>>());
        let code = "token='s3cret'";
        for (args, expected) in [
            (vec!["python", "-c", code], "python -c"),
            (vec!["python3", "-uc", code], "python3 -uc"),
            (vec!["python3", "-W", "ignore", "-c", code], "python3 -c"),
            (vec!["node", "-e", code], "node -e"),
            (vec!["node", "-p", code], "node -p"),
            (vec!["node", "-pe", code], "node -p"),
            (vec!["node", "--eval", code], "node --eval"),
            (vec!["node", "--print", code], "node --print"),
            (vec!["node", &format!("--eval={code}")], "node --eval"),
            (vec!["sh", "-c", code], "sh -c"),
            (vec!["bash", "-xc", code], "bash -xc"),
            (vec!["/bin/bash", "--", "-c", code], "bash -c"),
            (vec!["perl", "-le", code], "perl -le"),
            (vec!["perl", &format!("-e{code}")], "perl -e"),
            (vec!["ruby", "-e", code], "ruby -e"),
            (vec!["php", "-r", code], "php -r"),
            (vec!["deno", "eval", code], "deno"),
            (vec!["bun", "-e", code], "bun -e"),
            // An interpreter's flag not listed: its code is no file.
            (vec!["lua", "-l", code], "lua"),
        ] {
            let got = name(&args);
            assert_eq!(got, expected, "{args:?}");
            assert!(!got.contains("s3cret"), "{got}");
        }
    }

    #[test]
    fn a_long_command_line_is_cut_on_a_character_boundary() {
        assert_eq!(cut("ééé".to_owned(), 3), "é");
        assert_eq!(cut("abc".to_owned(), 5), "abc");
    }
}
