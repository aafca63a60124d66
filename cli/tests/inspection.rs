//! The operator's commands against a real redis-server: `list`, `unlock
//! --force`, `watch`, `-v`, and a killed holder's registration running out.

use std::process::{Output, Stdio};
use std::time::Duration;

use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;
use redis::Commands;
use rlock_core::{Client, LockOptions, LostReason, Wait};
use rlock_test_support::{eventually, RedisServer};
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{ChildStdout, Command};

fn rlock(redis: &RedisServer) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rlock"));
    c.env("REDIS_URL", redis.url());
    c
}

async fn run(redis: &RedisServer, args: &[&str]) -> Output {
    rlock(redis)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn leased(secs: u64) -> LockOptions {
    LockOptions::default().ttl(Duration::from_secs(secs))
}

#[tokio::test]
async fn list_shows_each_held_lock_with_its_holder_and_refuses_a_pattern_it_cannot_keep_under_the_prefix(
) {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let mut held = Vec::new();
    for name in ["li:a", "li:b", "other"] {
        let lock = client.lock_with(name, leased(20)).unwrap();
        lock.acquire(Wait::Once).await.unwrap();
        held.push(lock);
    }
    let out = run(&redis, &["list", "li:*"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let mut names: Vec<String> = text(&out.stdout)
        .lines()
        .map(|l| l.split('\t').next().unwrap().to_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["li:a", "li:b"]);

    let out = run(&redis, &["list", "--json"]).await;
    let listed: Vec<serde_json::Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(listed.len(), 3);
    for l in &listed {
        assert_eq!(l["held"], true);
        assert!(l["owner"].as_str().unwrap().starts_with(client.id()));
        assert!(l["ttl_ms"].as_u64().unwrap() <= 20_000);
    }

    for bad in ["", "trailing\\"] {
        let out = run(&redis, &["list", bad]).await;
        assert_eq!(
            out.status.code(),
            Some(64),
            "{bad:?}: {}",
            text(&out.stderr)
        );
    }
}

#[tokio::test]
async fn unlock_force_hands_the_lock_to_the_waiter_and_its_holder_hears_it_lost() {
    let redis = RedisServer::start();
    let holder = Client::connect(&redis.url()).await.unwrap();
    let lock = holder.lock_with("stuck", leased(20)).unwrap();
    lock.acquire(Wait::Once).await.unwrap();
    let waiter = Client::connect(&redis.url()).await.unwrap();
    let waiting = waiter.lock_with("stuck", leased(20)).unwrap();
    let waited = tokio::spawn(async move {
        waiting
            .acquire(Wait::For(Duration::from_secs(15)))
            .await
            .map(|_| waiting)
    });
    assert!(
        eventually(Duration::from_secs(5), || in_line(&redis, "stuck")).await,
        "the waiter in line"
    );

    // Not without --force; not unconfirmed without a terminal.
    let out = run(&redis, &["unlock", "stuck"]).await;
    assert_eq!(out.status.code(), Some(64));
    let out = run(&redis, &["unlock", "--force", "stuck"]).await;
    assert_eq!(out.status.code(), Some(64), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("--yes"));
    assert!(lock.lost().is_none(), "still held");

    let out = run(&redis, &["unlock", "--force", "--yes", "stuck"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("released"),
        "{}",
        text(&out.stdout)
    );
    // The waiter has it long before the holder's lease (20 s) would end.
    let got = tokio::time::timeout(Duration::from_secs(5), waited)
        .await
        .expect("the waiter was handed the lock")
        .unwrap()
        .expect("acquired");
    assert!(got.fencing_token().is_some());
    // The holder hears of it at its next renewal (every 20/3 s).
    assert!(
        eventually(Duration::from_secs(10), || lock.lost().is_some()).await,
        "the holder was told"
    );
    // Told why: an operator's forced release, not a rival taking it.
    assert_eq!(lock.lost(), Some(LostReason::Forced));
    let out = run(&redis, &["unlock", "--force", "--yes", "never-held"]).await;
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stdout).contains("free"));
}

/// Whether `name`'s line has a waiter.
fn in_line(redis: &RedisServer, name: &str) -> bool {
    let n: usize = redis
        .conn()
        .llen(format!("rlock:{{{name}}}:queue"))
        .unwrap();
    n > 0
}

async fn next_line(lines: &mut Lines<BufReader<ChildStdout>>, within: Duration) -> String {
    tokio::time::timeout(within, lines.next_line())
        .await
        .expect("a line in time")
        .unwrap()
        .expect("watch still running")
}

#[tokio::test]
async fn watch_follows_acquired_released_and_expired_and_stays_quiet_on_a_name_never_used() {
    let redis = RedisServer::start();
    let mut watch = rlock(&redis)
        .args(["watch", "watched"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(watch.stdout.take().unwrap()).lines();
    let mut quiet = rlock(&redis)
        .args(["watch", "never-used"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let client = Client::connect(&redis.url()).await.unwrap();
    let lock = client.lock_with("watched", leased(20)).unwrap();
    lock.acquire(Wait::Once).await.unwrap();
    let line = next_line(&mut lines, Duration::from_secs(5)).await;
    // "held by" when the watcher's first read came after the acquisition.
    assert!(
        line.contains("watched: acquired by ") || line.contains("watched: held by "),
        "{line}"
    );
    assert!(line.contains("(rust)"), "{line}");
    lock.release().await.unwrap();
    let line = next_line(&mut lines, Duration::from_secs(5)).await;
    assert!(line.ends_with("watched: released"), "{line}");

    let short = client
        .lock_with(
            "watched",
            LockOptions::default()
                .ttl(Duration::from_millis(500))
                .auto_renew(false),
        )
        .unwrap();
    short.acquire(Wait::Once).await.unwrap();
    let line = next_line(&mut lines, Duration::from_secs(5)).await;
    assert!(line.contains("acquired by"), "{line}");
    let line = next_line(&mut lines, Duration::from_secs(5)).await;
    assert!(
        line.ends_with("watched: expired (its lease ran out)"),
        "{line}"
    );

    for child in [&watch, &quiet] {
        kill(Pid::from_raw(child.id().unwrap() as i32), Signal::SIGINT).unwrap();
    }
    let status = tokio::time::timeout(Duration::from_secs(5), watch.wait())
        .await
        .expect("Ctrl-C stops watch")
        .unwrap();
    assert_eq!(status.code(), Some(0));
    let out = tokio::time::timeout(Duration::from_secs(5), async {
        let mut stdout = quiet.stdout.take().unwrap();
        let mut said = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut stdout, &mut said)
            .await
            .unwrap();
        (quiet.wait().await.unwrap(), said)
    })
    .await
    .expect("Ctrl-C stops watch");
    assert_eq!(out.0.code(), Some(0));
    assert_eq!(out.1, "", "a name never used is watched quietly");
}

#[tokio::test]
async fn verbose_logs_a_lost_lease_to_stderr_and_without_it_only_the_one_sentence() {
    let redis = RedisServer::start();
    for (flags, logged) in [(&["-v"][..], true), (&[][..], false)] {
        let mut child = rlock(&redis)
            .args(flags)
            .args(["exec", "--ttl", "1", "vv", "--", "sleep", "30"])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        assert!(
            eventually(Duration::from_secs(5), || redis
                .conn()
                .exists::<_, bool>("rlock:{vv}")
                .unwrap())
            .await
        );
        let _: () = redis.conn().del("rlock:{vv}").unwrap();
        let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
            .await
            .expect("stopped")
            .unwrap();
        assert_eq!(status.code(), Some(70));
        let mut said = String::new();
        tokio::io::AsyncReadExt::read_to_string(child.stderr.as_mut().unwrap(), &mut said)
            .await
            .unwrap();
        let warned = said
            .lines()
            .any(|l| l.contains("WARN") && l.contains("lock lost"));
        assert_eq!(warned, logged, "{flags:?}: {said}");
        assert!(!said.contains("password"));
    }
}

#[tokio::test]
async fn a_killed_holders_registration_runs_out_with_its_lease() {
    let redis = RedisServer::start();
    let holder = rlock(&redis)
        .args(["exec", "--ttl", "2", "killed", "--", "sleep", "120"])
        .process_group(0)
        .spawn()
        .unwrap();
    let client = Client::connect(&redis.url()).await.unwrap();
    let mut seen = None;
    for _ in 0..500 {
        let s = client.inspect("killed").await.unwrap();
        if s.holder.is_some() {
            seen = Some(s);
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let seen = seen.expect("the CLI took the lock");
    let party = seen.holder.unwrap();
    let info = party.client.expect("the CLI registered");
    assert_eq!(info.face, "cli");
    assert_eq!(info.pid, holder.id());
    let key = format!("rlock:client:{{{}}}", party.client_id);
    let pttl: i64 = redis.conn().pttl(&key).unwrap();
    assert!(pttl > 0 && pttl <= 30_000, "{pttl}");

    killpg(Pid::from_raw(holder.id().unwrap() as i32), Signal::SIGKILL).unwrap();
    assert!(
        eventually(Duration::from_secs(40), || !redis
            .conn()
            .exists::<_, bool>(&key)
            .unwrap())
        .await,
        "the registration ran out"
    );
    let after = client.inspect("killed").await.unwrap();
    assert!(
        after.holder.is_none(),
        "the lock's lease (2 s) ran out first"
    );
}

/// `rlock status` of a lock whose holder was SIGKILLed: its lease still
/// runs, and the holder line says that its pid no longer runs here; once
/// its registration is gone too, it says that instead of showing a pid.
#[tokio::test]
async fn status_says_when_a_killed_holder_is_gone() {
    let redis = RedisServer::start();
    let mut holder = rlock(&redis)
        .args(["exec", "--ttl", "20", "gone", "--", "sleep", "120"])
        .process_group(0)
        .spawn()
        .unwrap();
    let pid = holder.id().unwrap();
    let client = Client::connect(&redis.url()).await.unwrap();
    let mut party = None;
    for _ in 0..500 {
        party = client.inspect("gone").await.unwrap().holder;
        if party.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let party = party.expect("the CLI took the lock");
    let out = run(&redis, &["status", "gone"]).await;
    let shown = text(&out.stdout);
    assert!(shown.contains(&format!("pid {pid} (cli) unit")), "{shown}");

    killpg(Pid::from_raw(pid as i32), Signal::SIGKILL).unwrap();
    holder.wait().await.unwrap();
    let out = run(&redis, &["status", "gone"]).await;
    let shown = text(&out.stdout);
    assert!(
        shown.contains(&format!(
            "pid {pid} (cli, exited: no such process on this host) unit"
        )),
        "{shown}"
    );

    let key = format!("rlock:client:{{{}}}", party.client_id);
    let _: () = redis.conn().del(&key).unwrap();
    let out = run(&redis, &["status", "gone"]).await;
    let shown = text(&out.stdout);
    assert!(
        shown.contains("(its client no longer registered: it exited or lost Redis)"),
        "{shown}"
    );
    assert!(!shown.contains(&format!("pid {pid}")), "{shown}");
}

/// An operator's forced release reaches its holder by its own name: the
/// holder's release, before any renewal, is refused as `forced`, and its
/// scope ends lost as `forced`.
#[tokio::test]
async fn a_forced_unlock_reaches_the_holder_as_forced() {
    let redis = RedisServer::start();
    let holder = Client::connect(&redis.url()).await.unwrap();
    let ended = forced_out(&redis, &holder, "forced").await.finish().await;
    assert!(
        matches!(
            ended,
            Err(rlock_core::Error::Lost {
                reason: LostReason::Forced,
                ..
            })
        ),
        "{ended:?}"
    );

    let refused = forced_out(&redis, &holder, "forced").await.release().await;
    assert!(
        matches!(
            refused,
            Err(rlock_core::Error::NotOwned {
                reason: rlock_core::NotOwnedReason::Forced,
                ..
            })
        ),
        "{refused:?}"
    );
    assert_eq!(
        rlock_core::NotOwnedReason::Forced.as_str(),
        "forced",
        "the reason every face shows"
    );
}

/// `holder`'s lock on `name` (a 20 s lease, so no renewal comes before the
/// test is done), which an operator then freed with `rlock unlock --force`.
async fn forced_out(redis: &RedisServer, holder: &Client, name: &str) -> rlock_core::Lock {
    let lock = holder.lock_with(name, leased(20)).unwrap();
    lock.acquire(Wait::Once).await.unwrap();
    let out = run(redis, &["unlock", "--force", "--yes", name]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    lock
}
