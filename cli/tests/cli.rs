//! The `rlock` binary against a real redis-server: exit codes, the lease
//! watchdog around CMD, signals, `status`, and bad input.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use redis::Commands;
use rlock_core::{CacheOptions, Client, ClientOptions, LockOptions, Read, Wait};
use rlock_test_support::{
    eventually, free_port, until, wait_until, Masters, RedisCluster, RedisServer,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

fn rlock(redis: &RedisServer) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rlock"));
    c.env("REDIS_URL", redis.url());
    c
}

async fn run(redis: &RedisServer, args: &[&str]) -> Output {
    rlock(redis).args(args).output().await.unwrap()
}

fn code(out: &Output) -> i32 {
    out.status
        .code()
        .expect("rlock itself is never killed here")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A command that writes `word` to `term` when it gets SIGTERM (then exits 0),
/// and touches `ready` once it listens for it; it runs until then.
struct Trapping {
    script: String,
    term: PathBuf,
    ready: PathBuf,
}

fn trapping(dir: &str, word: &str) -> Trapping {
    let dir = scratch(dir);
    let (term, ready) = (dir.join("term"), dir.join("ready"));
    let script = format!(
        "trap 'echo {word} > {}; exit 0' TERM; touch {}; while :; do sleep 0.05; done",
        term.display(),
        ready.display()
    );
    Trapping {
        script,
        term,
        ready,
    }
}

impl Trapping {
    async fn started(&self) {
        let ready = &self.ready;
        assert!(
            eventually(Duration::from_secs(5), || ready.exists()).await,
            "the command started"
        );
    }

    fn heard(&self) -> String {
        std::fs::read_to_string(&self.term)
            .unwrap()
            .trim()
            .to_owned()
    }
}

/// A client of the test's own holding `name`, until it is dropped.
async fn held_elsewhere(redis: &RedisServer, name: &str) -> Client {
    let client = Client::connect(&redis.url()).await.unwrap();
    client
        .lock(name)
        .unwrap()
        .acquire(Wait::Once)
        .await
        .unwrap();
    client
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rlock-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[tokio::test]
async fn the_commands_exit_status_is_rlocks_and_the_lock_is_released() {
    let redis = RedisServer::start();
    let out = run(&redis, &["exec", "job", "--", "sh", "-c", "exit 3"]).await;
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    let out = run(&redis, &["exec", "job", "--", "sh", "-c", "kill -9 $$"]).await;
    assert_eq!(code(&out), 128 + 9);
    assert!(!redis.conn().exists::<_, bool>("rlock:{job}").unwrap());
}

#[tokio::test]
async fn stdio_passes_through_and_the_fencing_token_is_exported() {
    let redis = RedisServer::start();
    let mut child = rlock(&redis)
        .args([
            "exec",
            "io",
            "--",
            "sh",
            "-c",
            "cat; echo \" token=$RLOCK_FENCING_TOKEN\"",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"hello")
        .await
        .unwrap();
    let out = child.wait_with_output().await.unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "hello token=1");
    let out = run(
        &redis,
        &["exec", "io", "--", "sh", "-c", "echo $RLOCK_FENCING_TOKEN"],
    )
    .await;
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "2",
        "tokens grow"
    );
}

#[tokio::test]
async fn a_busy_lock_exits_75_and_runs_nothing() {
    let redis = RedisServer::start();
    let _holder = held_elsewhere(&redis, "busy").await;
    let dir = scratch("busy");
    let marker = dir.join("ran");
    let touch = format!("touch {}", marker.display());

    let out = run(
        &redis,
        &["exec", "--no-wait", "busy", "--", "sh", "-c", &touch],
    )
    .await;
    assert_eq!(code(&out), 75, "{}", stderr(&out));

    let start = Instant::now();
    let out = run(
        &redis,
        &["exec", "--timeout", "0.5", "busy", "--", "sh", "-c", &touch],
    )
    .await;
    assert_eq!(code(&out), 75);
    assert!(start.elapsed() >= Duration::from_millis(500));
    assert!(!marker.exists(), "the command never ran");
}

#[tokio::test]
async fn queue_after_decides_whether_a_waiting_command_takes_a_place_in_line() {
    let redis = RedisServer::start();
    let _holder = held_elsewhere(&redis, "held").await;
    // The default (10 ms) would join the line within these 0.3 s waits.
    let waiting = |queue_after: &'static str| {
        [
            "exec",
            "--queue-after",
            queue_after,
            "--timeout",
            "0.3",
            "held",
            "--",
            "true",
        ]
    };
    let out = run(&redis, &waiting("600")).await;
    assert_eq!(code(&out), 75, "{}", stderr(&out));
    assert_eq!(
        redis.calls("rpush"),
        0,
        "took a place in line with 600 s to go"
    );
    let out = run(&redis, &waiting("0")).await;
    assert_eq!(code(&out), 75, "{}", stderr(&out));
    assert_eq!(
        redis.calls("rpush"),
        1,
        "--queue-after 0 never took a place in line"
    );
}

#[tokio::test]
async fn a_lost_lease_stops_the_command_with_sigterm_and_exits_70() {
    let redis = RedisServer::start();
    let cmd = trapping("lost", "got-term");
    let child = rlock(&redis)
        .args([
            "exec",
            "--ttl",
            "1",
            "victim",
            "--",
            "sh",
            "-c",
            &cmd.script,
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    cmd.started().await;
    let _: () = redis.conn().del("rlock:{victim}").unwrap();
    let out = tokio::time::timeout(Duration::from_secs(10), child.wait_with_output())
        .await
        .expect("rlock did not stop the command")
        .unwrap();
    assert_eq!(code(&out), 70, "{}", stderr(&out));
    let said = stderr(&out);
    let why = "rlock: lock \"victim\" was lost: \
               the lock key disappeared as it expired or was deleted; stopping the command";
    assert!(
        said.lines().any(|l| l == why),
        "one plain sentence says why: {said}"
    );
    assert_eq!(cmd.heard(), "got-term");
}

/// flock(1)'s `-n` and `-E CODE`: one attempt, and the chosen exit status
/// when the lock is busy; `-w SECS` (`--wait`): a bounded wait, then 75.
#[tokio::test]
async fn flocks_n_e_and_w_options_keep_their_meaning() {
    let redis = RedisServer::start();
    let _holder = held_elsewhere(&redis, "nightly").await;
    let dir = scratch("flock-busy");
    let marker = dir.join("ran");
    let marker = marker.to_str().unwrap();

    let start = Instant::now();
    let out = run(
        &redis,
        &["exec", "-n", "-E", "3", "nightly", "touch", marker],
    )
    .await;
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    assert!(start.elapsed() < Duration::from_secs(2), "one attempt");
    let out = run(&redis, &["exec", "--nonblock", "nightly", "touch", marker]).await;
    assert_eq!(code(&out), 75, "75 unless -E says otherwise");

    for wait in ["-w", "--wait"] {
        let start = Instant::now();
        let out = run(&redis, &["exec", wait, "0.5", "nightly", "touch", marker]).await;
        assert_eq!(code(&out), 75, "{wait}: {}", stderr(&out));
        assert!(start.elapsed() >= Duration::from_millis(500), "{wait}");
    }
    assert!(
        !std::path::Path::new(marker).exists(),
        "the command never ran"
    );
}

/// flock(1)'s `-c COMMAND`, before NAME or in flock's place after it: run
/// through `sh -c`, holding the lock.
#[tokio::test]
async fn dash_c_runs_a_shell_command_under_the_lock() {
    let redis = RedisServer::start();
    let out = run(
        &redis,
        &[
            "exec",
            "-c",
            "echo token=$RLOCK_FENCING_TOKEN && exit 4",
            "nightly",
        ],
    )
    .await;
    assert_eq!(code(&out), 4, "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "token=1");
    let out = run(
        &redis,
        &[
            "exec",
            "nightly",
            "-c",
            "rlock_is=$(echo held); echo $rlock_is",
        ],
    )
    .await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "held");
    assert!(!redis.conn().exists::<_, bool>("rlock:{nightly}").unwrap());
}

/// `rlock exec NAME CMD ARGS...`: everything after NAME is the command's,
/// its own options included; `--` before CMD still works.
#[tokio::test]
async fn the_command_follows_name_with_or_without_dashes() {
    let redis = RedisServer::start();
    for args in [
        &["exec", "nightly", "echo", "-n", "hi"][..],
        &["exec", "nightly", "--", "echo", "-n", "hi"],
        &["exec", "-n", "nightly", "echo", "-n", "hi"],
    ] {
        let out = run(&redis, args).await;
        assert_eq!(code(&out), 0, "{args:?}: {}", stderr(&out));
        assert_eq!(String::from_utf8_lossy(&out.stdout), "hi", "{args:?}");
    }
    let out = run(&redis, &["exec", "nightly", "sh", "-c", "exit 5"]).await;
    assert_eq!(code(&out), 5, "{}", stderr(&out));
    let out = run(&redis, &["exec", "nightly", "-n"]).await;
    assert_eq!(
        code(&out),
        127,
        "-n after NAME is the command: {}",
        stderr(&out)
    );
}

#[tokio::test]
async fn a_command_ignoring_sigterm_is_killed_after_the_grace_period() {
    let redis = RedisServer::start();
    let dir = scratch("stubborn");
    let ready = dir.join("ready");
    let script = format!(
        "trap '' TERM; touch {}; while :; do sleep 0.05; done",
        ready.display()
    );
    let child = rlock(&redis)
        .args([
            "exec", "--ttl", "1", "--grace", "0.3", "stubborn", "--", "sh", "-c", &script,
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(
        eventually(Duration::from_secs(5), || ready.exists()).await,
        "the command started"
    );
    let _: () = redis.conn().del("rlock:{stubborn}").unwrap();
    let out = tokio::time::timeout(Duration::from_secs(10), child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(code(&out), 70, "{}", stderr(&out));
}

#[tokio::test]
async fn sigterm_to_rlock_is_forwarded_and_the_lock_released() {
    let redis = RedisServer::start();
    let cmd = trapping("forward", "forwarded");
    let mut child = rlock(&redis)
        .args(["exec", "fwd", "--", "sh", "-c", &cmd.script])
        .spawn()
        .unwrap();
    cmd.started().await;
    assert!(
        redis.conn().exists::<_, bool>("rlock:{fwd}").unwrap(),
        "held while the command runs"
    );
    let pid = nix::unistd::Pid::from_raw(child.id().unwrap() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.code(), Some(0), "the command's own status");
    assert_eq!(cmd.heard(), "forwarded");
    assert!(
        !redis.conn().exists::<_, bool>("rlock:{fwd}").unwrap(),
        "released after the command exited"
    );
}

#[tokio::test]
async fn status_json_reports_held_and_free_locks() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let lock = client
        .lock_with("stat", LockOptions::default().ttl(Duration::from_secs(20)))
        .unwrap();
    let held = lock.acquire(Wait::Once).await.unwrap();
    lock.acquire(Wait::Once).await.unwrap();

    let out = run(&redis, &["status", "--json", "stat"]).await;
    assert_eq!(code(&out), 0);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["name"], "stat");
    assert_eq!(v["held"], true);
    assert_eq!(v["count"], 2);
    assert_eq!(v["fence"], held.fencing_token);
    let ttl = v["ttl_ms"].as_u64().unwrap();
    assert!(ttl > 10_000 && ttl <= 20_000, "{ttl}");

    lock.release().await.unwrap();
    lock.release().await.unwrap();
    let out = run(&redis, &["status", "--json", "stat"]).await;
    assert_eq!(code(&out), 0, "free is not an error");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["held"], false);
    assert_eq!(v["ttl_ms"], serde_json::Value::Null);
    assert_eq!(v["count"], 0);
    assert_eq!(v["fence"], serde_json::Value::Null);
    assert_eq!(v["fence_counter"], held.fencing_token);

    let out = run(&redis, &["status", "stat"]).await;
    assert!(String::from_utf8_lossy(&out.stdout).contains("free"));
}

/// `--shared` takes the read side of the read-write lock NAME, `-x` its
/// write side, `--semaphore N` one of N permits; `status` shows them.
#[tokio::test]
async fn shared_exclusive_and_semaphore_commands_keep_their_rules() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let options = || LockOptions::default().ttl(Duration::from_secs(20));
    let reader = client.rw_lock("report", options()).unwrap();
    reader.read().acquire(Wait::Once).await.unwrap();
    let out = run(&redis, &["exec", "-n", "--shared", "report", "true"]).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let out = run(&redis, &["exec", "-n", "-x", "report", "true"]).await;
    assert_eq!(code(&out), 75, "a writer waits for the reader");
    // The mutex of that name is another lock.
    let out = run(&redis, &["exec", "-n", "report", "true"]).await;
    assert_eq!(code(&out), 0);
    let out = run(&redis, &["status", "--json", "report"]).await;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["rwlock"]["readers"], 1);
    assert_eq!(v["rwlock"]["writer"], false);
    assert_eq!(v["semaphore"], serde_json::Value::Null);
    reader.read().release().await.unwrap();
    let writer = client.rw_lock("report", options()).unwrap();
    writer.write().acquire(Wait::Once).await.unwrap();
    let out = run(&redis, &["exec", "-n", "-s", "report", "true"]).await;
    assert_eq!(code(&out), 75, "a reader waits for the writer");
    writer.write().release().await.unwrap();

    let sem = client.semaphore("batch", 3, options()).unwrap();
    sem.acquire(2, Wait::Once).await.unwrap();
    let out = run(&redis, &["exec", "-n", "--semaphore", "3", "batch", "true"]).await;
    assert_eq!(
        code(&out),
        0,
        "one permit of three is free: {}",
        stderr(&out)
    );
    let out = run(&redis, &["exec", "-n", "--semaphore", "4", "batch", "true"]).await;
    assert_eq!(code(&out), 64, "another size: {}", stderr(&out));
    assert!(stderr(&out).contains('3') && stderr(&out).contains('4'));
    let other = client.semaphore("batch", 3, options()).unwrap();
    other.acquire(1, Wait::Once).await.unwrap();
    let out = run(&redis, &["exec", "-n", "--semaphore", "3", "batch", "true"]).await;
    assert_eq!(code(&out), 75, "no permit is free");
    let out = run(&redis, &["status", "batch"]).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("3 of 3 permits used, 2 holders, 0 waiting"),
        "{text}"
    );
    sem.release().await.unwrap();
    other.release().await.unwrap();
}

/// A command for `rlock cached`, run through `sh -c`: it counts its runs,
/// says it started, and waits for the test to open its gate before it does
/// what it was given.
struct Gated {
    runs: PathBuf,
    started: PathBuf,
    gate: PathBuf,
}

impl Gated {
    fn new(dir: &str) -> Self {
        let dir = scratch(dir);
        Gated {
            runs: dir.join("runs"),
            started: dir.join("started"),
            gate: dir.join("gate"),
        }
    }

    fn script(&self, then: &str) -> String {
        format!(
            "echo run >> {runs}; touch {started}; while [ ! -e {gate} ]; do sleep 0.02; done; {then}",
            runs = self.runs.display(),
            started = self.started.display(),
            gate = self.gate.display(),
        )
    }

    async fn started(&self) {
        let started = &self.started;
        assert!(
            eventually(Duration::from_secs(10), || started.exists()).await,
            "the command started"
        );
    }

    fn open(&self) {
        std::fs::write(&self.gate, "").unwrap();
    }

    fn runs(&self) -> usize {
        std::fs::read_to_string(&self.runs)
            .map(|text| text.lines().count())
            .unwrap_or(0)
    }
}

/// `rlock cached ARGS`, its stdout and stderr captured, started now.
fn cached_call(redis: &RedisServer, args: &[&str]) -> tokio::process::Child {
    rlock(redis)
        .arg("cached")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Whether the cache holds an entry (a value or "nothing found") for `key`.
fn stored(redis: &RedisServer, key: &str) -> bool {
    let entry = format!("rlock:{{{key}}}:cached");
    redis.conn().exists(entry).unwrap()
}

#[tokio::test]
async fn cached_runs_cmd_once_for_concurrent_callers_and_each_prints_its_bytes() {
    let redis = RedisServer::start();
    let cmd = Gated::new("cached-once");
    let script = cmd.script(r"printf 'row 1\nnul\000byte\377\n'");
    let callers: Vec<_> = (0..6)
        .map(|_| {
            cached_call(
                &redis,
                &["--ttl", "60", "report", "--", "sh", "-c", &script],
            )
        })
        .collect();
    cmd.started().await;
    // The five others wait for that rebuild, each subscribed to the
    // entry's news, before it ends.
    until(|| async { redis.subscribers("rlock:{report}:cached:news") == 5 }).await;
    cmd.open();
    for caller in callers {
        let out = finished(caller).await;
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        assert_eq!(out.stdout, b"row 1\nnul\x00byte\xff\n");
    }
    assert_eq!(cmd.runs(), 1, "one run of CMD for six callers");
}

#[tokio::test]
async fn cached_prints_the_stored_bytes_exactly_whatever_face_stored_them() {
    let redis = RedisServer::start();
    let bytes: &[u8] = b"\x00\xff\r\nno newline at the end";
    let script = r"printf '\000\377\r\nno newline at the end'";
    let out = run(
        &redis,
        &["cached", "--ttl", "60", "blob", "--", "sh", "-c", script],
    )
    .await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(out.stdout, bytes);
    let mut conn = redis.conn();
    let (value, format): (Vec<u8>, String) = redis::cmd("HMGET")
        .arg("rlock:{blob}:cached")
        .arg("value")
        .arg("format")
        .query(&mut conn)
        .unwrap();
    assert_eq!((value.as_slice(), format.as_str()), (bytes, "bytes"));
    // A hit: printed as stored; CMD does not run.
    let out = run(&redis, &["cached", "--ttl", "60", "blob", "--", "false"]).await;
    assert_eq!((code(&out), out.stdout.as_slice()), (0, bytes));

    // An empty stdout is a value like any other.
    let out = run(&redis, &["cached", "--ttl", "60", "empty", "--", "true"]).await;
    assert_eq!((code(&out), out.stdout.len()), (0, 0), "{}", stderr(&out));
    let out = run(
        &redis,
        &["cached", "--ttl", "60", "empty", "--", "echo", "never"],
    )
    .await;
    assert_eq!((code(&out), out.stdout.len()), (0, 0));

    // Stored by another face in its own format: printed as stored.
    let client = Client::connect(&redis.url()).await.unwrap();
    let cache = client
        .cache("doc", CacheOptions::new(Duration::from_secs(60)))
        .unwrap();
    let Read::Load(rebuild) = cache.read().await.unwrap() else {
        panic!("a miss");
    };
    rebuild
        .store(Some(br#"{"a":[1,2]}"#), "json")
        .await
        .unwrap();
    let out = run(&redis, &["cached", "--ttl", "60", "doc", "--", "false"]).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(out.stdout, br#"{"a":[1,2]}"#);
}

#[tokio::test]
async fn none_exit_caches_nothing_found_which_other_calls_exit_66_for() {
    let redis = RedisServer::start();
    let flags = ["--ttl", "60", "user:9"];
    let with = |tail: &[&'static str]| [&flags[..], tail].concat();
    let out = run(
        &redis,
        &[
            &["cached", "--none-exit", "5"][..],
            &with(&["--", "sh", "-c", "exit 5"]),
        ]
        .concat(),
    )
    .await;
    assert_eq!((code(&out), out.stdout.len()), (5, 0), "{}", stderr(&out));
    let out = run(
        &redis,
        &[
            &["cached", "--none-exit", "5"][..],
            &with(&["--", "echo", "never"]),
        ]
        .concat(),
    )
    .await;
    assert_eq!(
        (code(&out), out.stdout.len()),
        (5, 0),
        "kept, and CMD not run"
    );
    let out = run(
        &redis,
        &[&["cached"][..], &with(&["--", "echo", "never"])].concat(),
    )
    .await;
    assert_eq!((code(&out), out.stdout.len()), (66, 0), "{}", stderr(&out));
    // Without --none-exit, CMD's status is a failure like any other.
    let out = run(
        &redis,
        &[
            "cached", "--ttl", "60", "user:10", "--", "sh", "-c", "exit 5",
        ],
    )
    .await;
    assert_eq!(code(&out), 5);
    assert!(!stored(&redis, "user:10"));
}

#[tokio::test]
async fn a_failed_cmd_stores_nothing_exits_its_status_and_its_waiters_70_or_retry() {
    let redis = RedisServer::start();
    let cmd = Gated::new("cached-fail");
    let script = cmd.script("echo 'database down' >&2; exit 3");
    let rebuilder = cached_call(&redis, &["--ttl", "60", "flaky", "--", "sh", "-c", &script]);
    cmd.started().await;
    let sharing = cached_call(&redis, &["--ttl", "60", "flaky", "--", "echo", "never"]);
    let retrying = cached_call(
        &redis,
        &[
            "--ttl",
            "60",
            "--on-error",
            "retry",
            "flaky",
            "--",
            "echo",
            "second",
        ],
    );
    until(|| async { redis.subscribers("rlock:{flaky}:cached:news") == 2 }).await;
    cmd.open();

    let out = finished(rebuilder).await;
    assert_eq!(code(&out), 3, "CMD's own status");
    assert!(
        stderr(&out).contains("database down"),
        "CMD's stderr passes through"
    );
    assert!(out.stdout.is_empty());
    let out = finished(sharing).await;
    assert_eq!(code(&out), 70, "{}", stderr(&out));
    assert!(out.stdout.is_empty());
    let err = stderr(&out);
    assert!(
        err.contains("\"flaky\"") && err.contains("exited with status 3: database down"),
        "{err}"
    );
    let out = finished(retrying).await;
    assert_eq!(
        (code(&out), out.stdout.as_slice()),
        (0, &b"second\n"[..]),
        "{}",
        stderr(&out)
    );

    let out = run(
        &redis,
        &["cached", "--ttl", "60", "absent", "--", "/no/such/command"],
    )
    .await;
    assert_eq!(code(&out), 127, "{}", stderr(&out));
    assert!(!stored(&redis, "absent"));
    let rebuild_lock: bool = redis.conn().exists("rlock:{absent}:rebuild").unwrap();
    assert!(!rebuild_lock, "the rebuild lock was left after CMD failed");
}

#[tokio::test]
async fn a_caller_gives_up_waiting_for_anothers_rebuild_after_timeout_with_75() {
    let redis = RedisServer::start();
    let cmd = Gated::new("cached-timeout");
    let rebuilder = cached_call(
        &redis,
        &[
            "--ttl",
            "60",
            "slow",
            "--",
            "sh",
            "-c",
            &cmd.script("echo v"),
        ],
    );
    cmd.started().await;
    let out = run(
        &redis,
        &[
            "cached",
            "--ttl",
            "60",
            "--timeout",
            "0.2",
            "slow",
            "--",
            "echo",
            "never",
        ],
    )
    .await;
    assert_eq!(code(&out), 75, "{}", stderr(&out));
    assert!(stderr(&out).contains("--timeout"), "{}", stderr(&out));
    cmd.open();
    let out = finished(rebuilder).await;
    assert_eq!((code(&out), out.stdout.as_slice()), (0, &b"v\n"[..]));
}

#[tokio::test]
async fn invalidate_makes_the_next_call_run_cmd_again() {
    let redis = RedisServer::start();
    let runs = scratch("cached-invalidate").join("runs");
    let script = format!(
        "echo run >> {runs}; printf 'v%s' $(wc -l < {runs})",
        runs = runs.display()
    );
    let call = ["cached", "--ttl", "60", "price", "--", "sh", "-c", &script];
    assert_eq!(run(&redis, &call).await.stdout, b"v1");
    assert_eq!(run(&redis, &call).await.stdout, b"v1", "a hit");
    let out = run(&redis, &["invalidate", "price"]).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(out.stdout.is_empty() && out.stderr.is_empty());
    assert_eq!(run(&redis, &call).await.stdout, b"v2", "CMD ran again");
    for _ in 0..2 {
        let out = run(&redis, &["invalidate", "price"]).await;
        assert_eq!(code(&out), 0, "with or without an entry");
    }
}

#[tokio::test]
async fn a_stale_value_is_printed_and_stdout_closed_before_the_refresh_runs() {
    let redis = RedisServer::start();
    let flags = [
        "cached", "--ttl", "1", "--jitter", "0", "--early", "0", "--stale", "60", "news",
    ];
    let with = |tail: &[&str]| -> Vec<String> {
        flags.iter().chain(tail).map(|s| s.to_string()).collect()
    };
    let out = rlock(&redis)
        .args(with(&["--", "printf", "old"]))
        .output()
        .await
        .unwrap();
    assert_eq!(out.stdout, b"old", "{}", stderr(&out));
    // Stale once its second is up: what is left of it is the stale window.
    until(|| async {
        let left: i64 = redis.conn().pttl("rlock:{news}:cached").unwrap();
        left < 60_000
    })
    .await;
    let cmd = Gated::new("cached-refresh");
    let mut child = rlock(&redis)
        .args(with(&["--", "sh", "-c", &cmd.script("printf new")]))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut printed = Vec::new();
    let mut stdout = child.stdout.take().unwrap();
    tokio::time::timeout(Duration::from_secs(10), stdout.read_to_end(&mut printed))
        .await
        .expect("stdout ends before the refresh does")
        .unwrap();
    assert_eq!(printed, b"old");
    cmd.started().await;
    assert!(
        child.try_wait().unwrap().is_none(),
        "rlock refreshes before it exits"
    );
    cmd.open();
    let status = tokio::time::timeout(Duration::from_secs(15), child.wait())
        .await
        .expect("rlock finished")
        .unwrap();
    assert!(status.success());
    let value: Vec<u8> = redis.conn().hget("rlock:{news}:cached", "value").unwrap();
    assert_eq!(value, b"new");
}

/// Each bad value of `rlock cached` or `rlock invalidate` exits 64 with a
/// message naming its flag (the matrix below checks that none reaches Redis).
#[tokio::test]
async fn cached_bad_input_is_a_usage_error_naming_the_flag() {
    let redis = RedisServer::start();
    for (args, named) in bad_cached_invocations() {
        let out = run(&redis, &args).await;
        let err = stderr(&out);
        assert_eq!(code(&out), 64, "{args:?}: {err}");
        assert!(err.contains(named), "{args:?} names {named}: {err}");
    }
}

fn strs(args: &[&str]) -> Vec<OsString> {
    args.iter().map(OsString::from).collect()
}

/// The rows of the invalid-argument matrix: every subcommand, flag and
/// argument with bad values (types, ranges, NaN/Infinity, huge values, empty
/// names, malformed URLs). A name over 1 MiB cannot be a row: Linux refuses
/// any single argument over 128 KiB (E2BIG) before rlock runs.
fn bad_invocations(unreachable: &str) -> Vec<Vec<OsString>> {
    let over_a_year = (400 * 24 * 3600).to_string();
    let long_prefix = "p".repeat(257);
    let mut rows = Vec::new();
    let numbers: [(&str, Vec<&str>); 5] = [
        (
            "--ttl",
            vec![
                "0",
                "=-1",
                "nan",
                "inf",
                "=-inf",
                "1e400",
                "1e-9",
                "0.001",
                "0.0099",
                "",
                "abc",
                "0x10",
                "5s",
                &over_a_year,
            ],
        ),
        (
            "--timeout",
            vec![
                "=-1",
                "=-0.001",
                "nan",
                "inf",
                "1e400",
                "",
                "abc",
                &over_a_year,
            ],
        ),
        ("--grace", vec!["=-1", "nan", "inf", "1e400", "", "abc"]),
        (
            "--queue-after",
            vec!["=-1", "nan", "inf", "1e400", "", "abc", &over_a_year],
        ),
        ("--sync-replicas", vec!["0", "101", "=-1", "1.5", "abc"]),
    ];
    for (flag, values) in numbers {
        for value in values {
            // `--flag=-1`: a negative value, not a flag named -1.
            let flag_value = match value.strip_prefix('=') {
                Some(v) => vec![format!("{flag}={v}")],
                None => vec![flag.to_owned(), value.to_owned()],
            };
            let mut row = strs(&["exec"]);
            row.extend(flag_value.into_iter().map(OsString::from));
            row.extend(strs(&["x", "--", "true"]));
            rows.push(row);
        }
    }
    for args in [
        &["exec", "--no-wait", "--timeout", "1", "x", "--", "true"][..],
        &["exec", "--ttl", "1", "--ttl", "2", "x", "--", "true"],
        &["exec", "--bogus", "x", "--", "true"],
        &["exec", "x"],
        &["exec", "x", "--"],
        &["exec", "-n", "-w", "1", "x", "true"],
        &["exec", "-E", "256", "x", "true"],
        &["exec", "-E", "-1", "x", "true"],
        &["exec", "-c", "true", "x", "true"],
        &["exec", "-c", "true"],
        &["exec", "--semaphore", "0", "x", "true"],
        &["exec", "--semaphore", "-1", "x", "true"],
        &["exec", "--semaphore", "1.5", "x", "true"],
        &["exec", "--semaphore", "1000001", "x", "true"],
        &["exec", "--shared", "--semaphore", "2", "x", "true"],
        &["exec", "-s", "-x", "x", "true"],
        &["status"],
        &["status", "--json"],
        &["cached", "--ttl", "5", "x"],
        &["cached", "--ttl", "5", "x", "--"],
        &["cached", "--ttl", "5", "-c", "true", "x", "true"],
        &["cached", "--ttl", "5", "--none-exit", "256", "x", "true"],
        &["cached", "--ttl", "5", "--none-exit", "=-1", "x", "true"],
        &["cached", "--ttl", "5s", "x", "true"],
        &["cached", "--ttl", "5", "--jitter", "abc", "x", "true"],
        &["invalidate"],
        &["frobnicate"],
        &[],
    ] {
        rows.push(strs(args));
    }
    for (args, _) in bad_cached_invocations() {
        rows.push(strs(&args));
    }
    let subcommands: [(&str, &[&str], &[&str]); 4] = [
        ("exec", &[], &["--", "true"]),
        ("status", &[], &[]),
        ("cached", &["--ttl", "5"], &["--", "true"]),
        ("invalidate", &[], &[]),
    ];
    for (sub, head, tail) in subcommands {
        let with = |args: &[&str]| strs(&[&[sub], head, args, tail].concat());
        for name in ["", "}starts-with-a-brace"] {
            rows.push(with(&[name]));
            // Refused as bad input even where Redis is unreachable.
            rows.push(with(&["--url", unreachable, name]));
        }
        for url in [
            "",
            "not a url",
            "http://127.0.0.1:6379",
            "http://user:hunter2@127.0.0.1:1",
            "REDIS://127.0.0.1",
            "unix:///tmp/redis.sock",
            "redis://",
            "rediss://",
            "redis+sentinel://",
            "redis://127.0.0.1:99999",
            "redis://[::1",
            "redis://host/notadb",
            "redis://host/-1",
            "redis://:@",
        ] {
            rows.push(with(&["--url", url, "x"]));
        }
        for prefix in ["", "has space", "{x}", "tab\t", &long_prefix] {
            rows.push(with(&["--prefix", prefix, "x"]));
        }
        rows.push(with(&["--tls-ca", "/no/such/ca.pem", "x"]));
        // A name that is not UTF-8: refused by the argument parser.
        let mut row = strs(&[&[sub], head].concat());
        row.push(OsString::from_vec(vec![b'a', 0xff]));
        row.extend(strs(tail));
        rows.push(row);
    }
    rows
}

/// Bad values of `rlock cached` and `rlock invalidate`, each with the flag
/// (or argument) its message names.
fn bad_cached_invocations() -> Vec<(Vec<&'static str>, &'static str)> {
    let tail = ["k", "--", "true"];
    let with = |flags: &[&'static str]| [&["cached"], flags, &tail[..]].concat();
    let mut rows = vec![
        (with(&["--ttl", "0"]), "--ttl"),
        (with(&["--ttl", "-1"]), "--ttl"),
        (with(&["--ttl", "0.005"]), "--ttl"),
        (with(&["--ttl", "nan"]), "--ttl"),
        (with(&[]), "--ttl"),
        (with(&["--ttl", "5", "--jitter", "1.5"]), "--jitter"),
        (with(&["--ttl", "5", "--jitter", "-0.1"]), "--jitter"),
        (with(&["--ttl", "5", "--on-error", "raise"]), "--on-error"),
        (with(&["--ttl", "5", "--stale", "-1"]), "--stale"),
        (with(&["--ttl", "5", "--none-ttl", "0"]), "--none-ttl"),
        (with(&["--ttl", "5", "--early", "101"]), "--early"),
        (with(&["--ttl", "5", "--lock-ttl", "0"]), "--lock-ttl"),
        (with(&["--ttl", "5", "--timeout", "-1"]), "--timeout"),
        (with(&["--ttl", "5", "--none-exit", "0"]), "--none-exit"),
    ];
    rows.push((vec!["cached", "--ttl", "5", "", "--", "true"], "cache key"));
    rows.push((vec!["invalidate", ""], "cache key"));
    rows
}

/// Each row of the matrix exits 64 (usage) without a panic, within a
/// deadline, and sends nothing to Redis; so does a malformed $REDIS_URL.
#[tokio::test]
async fn bad_input_is_a_usage_error_and_nothing_reaches_redis() {
    let redis = RedisServer::start();
    let mut monitor = redis.monitor();
    let unreachable = format!("redis://127.0.0.1:{}", free_port());
    for args in bad_invocations(&unreachable) {
        let out = tokio::time::timeout(Duration::from_secs(10), rlock(&redis).args(&args).output())
            .await
            .unwrap_or_else(|_| panic!("{args:?} hung"))
            .unwrap();
        let err = stderr(&out);
        assert_eq!(code(&out), 64, "{args:?}: {err}");
        assert!(
            !err.contains("panicked") && !err.contains("hunter2"),
            "{args:?}: {err}"
        );
        let sent = monitor.mark();
        assert!(sent.is_empty(), "{args:?} reached Redis: {sent:?}");
    }
    for url in ["http://127.0.0.1:6379", "redis://host/notadb"] {
        let out = rlock(&redis)
            .env("REDIS_URL", url)
            .args(["status", "x"])
            .output()
            .await
            .unwrap();
        assert_eq!(code(&out), 64, "REDIS_URL={url}: {}", stderr(&out));
    }
    assert!(monitor.mark().is_empty());
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query(&mut redis.conn())
        .unwrap();
    assert!(keys.is_empty(), "{keys:?}");
    let help = run(&redis, &["--help"]).await;
    assert_eq!(code(&help), 0);
    let text = String::from_utf8_lossy(&help.stdout);
    for line in ["75", "69", "66", "64", "70", "74", "127"] {
        assert!(text.contains(line), "--help documents exit {line}");
    }
}

#[tokio::test]
async fn an_unreachable_redis_exits_69_and_a_missing_command_127() {
    let redis = RedisServer::start();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = rlock(&redis)
        .args([
            "exec",
            "--url",
            &format!("redis://127.0.0.1:{port}"),
            "x",
            "--",
            "true",
        ])
        .output()
        .await
        .unwrap();
    assert_eq!(code(&out), 69, "{}", stderr(&out));

    let out = run(&redis, &["exec", "nf", "--", "/no/such/command"]).await;
    assert_eq!(code(&out), 127, "{}", stderr(&out));
    assert!(
        !redis.conn().exists::<_, bool>("rlock:{nf}").unwrap(),
        "released"
    );
}

/// `rlock SUBCOMMAND --url A --url B … ARGS`, with no `REDIS_URL` to fall back on.
fn rlock_on(subcommand: &str, urls: &[String]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rlock"));
    c.env_remove("REDIS_URL").arg(subcommand);
    for url in urls {
        c.args(["--url", url]);
    }
    c
}

/// Runs `rlock SUBCOMMAND --url …  ARGS` to its end.
async fn run_on(subcommand: &str, urls: &[String], args: &[&str]) -> Output {
    rlock_on(subcommand, urls)
        .args(args)
        .output()
        .await
        .unwrap()
}

/// The output of an `rlock` started earlier, once it ends (within 15 s).
async fn finished(child: tokio::process::Child) -> Output {
    tokio::time::timeout(Duration::from_secs(15), child.wait_with_output())
        .await
        .expect("rlock finished")
        .unwrap()
}

/// Three masters, a Redlock client holding `name` on them, and an `rlock
/// exec` over the same three waiting for it (subscribed on every master).
async fn redlock_exec_waiting(
    name: &str,
    exec_args: &[&str],
) -> (Masters, rlock_core::Lock, tokio::process::Child) {
    let masters = Masters::start(3);
    let holder = Client::connect_urls(&masters.urls(), ClientOptions::default())
        .await
        .unwrap();
    let held = holder
        .lock_with(name, LockOptions::default().ttl(Duration::from_secs(30)))
        .unwrap();
    held.acquire(Wait::Once).await.unwrap();
    let waiting = rlock_on("exec", &masters.urls())
        .args(exec_args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let channel = format!("rlock:{{{name}}}:released");
    assert!(
        eventually(Duration::from_secs(10), || masters
            .iter()
            .all(|m| m.subscribers(&channel) == 1))
        .await,
        "rlock exec waits on every master"
    );
    (masters, held, waiting)
}

#[tokio::test]
async fn redlock_exec_runs_the_command_with_one_master_of_three_down() {
    let (mut masters, held, waiting) = redlock_exec_waiting(
        "majority",
        &["--timeout", "20", "majority", "--", "sh", "-c", "echo ran"],
    )
    .await;
    masters[2].stop();
    // Released on the two live masters; the waiter then gets two of three.
    held.release().await.unwrap();
    let out = finished(waiting).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "ran");
    for m in &masters[..2] {
        assert!(!m.conn().exists::<_, bool>("rlock:{majority}").unwrap());
    }
}

#[tokio::test]
async fn redlock_exec_with_two_masters_of_three_down_exits_75_naming_the_quorum() {
    let (mut masters, held, waiting) = redlock_exec_waiting(
        "minority",
        &["--timeout", "2", "minority", "--", "sh", "-c", "echo ran"],
    )
    .await;
    masters[1].stop();
    masters[2].stop();
    // Free on the one live master: busy is not what stops it, the quorum is.
    held.release().await.unwrap();
    let out = finished(waiting).await;
    assert_eq!(code(&out), 75, "{}", stderr(&out));
    assert!(stderr(&out).contains("quorum"), "{}", stderr(&out));
    assert!(out.stdout.is_empty(), "the command never ran");
    assert!(!masters[0]
        .conn()
        .exists::<_, bool>("rlock:{minority}")
        .unwrap());
}

#[tokio::test]
async fn redlock_status_reports_the_majoritys_view() {
    let masters = Masters::start(3);
    let holder = Client::connect_urls(&masters.urls(), ClientOptions::default())
        .await
        .unwrap();
    let lock = holder.lock("shared").unwrap();
    let held = lock.acquire(Wait::Once).await.unwrap();
    let out = run_on("status", &masters.urls(), &["--json", "shared"]).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["held"], true);
    assert_eq!(v["fence"], held.fencing_token);
    let out = run_on(
        "exec",
        &masters.urls(),
        &["--no-wait", "shared", "--", "true"],
    )
    .await;
    assert_eq!(code(&out), 75, "{}", stderr(&out));
}

#[tokio::test]
async fn cluster_exec_and_status_work_against_a_three_master_cluster() {
    let cluster = RedisCluster::start(3, 0);
    let seeds = cluster.seed_urls();
    let mut alpha_token = 0;
    for name in ["alpha", "beta", "gamma", "delta"] {
        let token = [
            "--cluster",
            name,
            "--",
            "sh",
            "-c",
            "echo $RLOCK_FENCING_TOKEN",
        ];
        let out = run_on("exec", &seeds, &token).await;
        assert_eq!(code(&out), 0, "{name}: {}", stderr(&out));
        let token: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
        assert!(token >= 1, "{name}: {token}");
        if name == "alpha" {
            alpha_token = token;
        }
        let out = run_on("status", &seeds, &["--cluster", "--json", name]).await;
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["held"], false, "{name}: released");
        // The counter of the name's slot: at least the token just issued.
        assert!(v["fence_counter"].as_u64().unwrap() >= token, "{name}: {v}");
    }
    // The same lock as a Rust Cluster client's.
    let client = Client::connect_urls(&seeds, ClientOptions::default().cluster(true))
        .await
        .unwrap();
    let lock = client.lock("alpha").unwrap();
    assert!(lock.acquire(Wait::Once).await.unwrap().fencing_token > alpha_token);
    let busy = ["--cluster", "--no-wait", "alpha", "--", "true"];
    let out = run_on("exec", &seeds, &busy).await;
    assert_eq!(code(&out), 75, "{}", stderr(&out));
    lock.release().await.unwrap();
}

#[tokio::test]
async fn tls_ca_trusts_a_private_ca_and_without_it_exits_69() {
    let server = RedisServer::start_tls();
    let dir = scratch("tls");
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, server.tls_ca_pem().unwrap()).unwrap();
    let url = [server.url()];
    let out = run_on(
        "exec",
        &url,
        &["--tls-ca", ca.to_str().unwrap(), "tls", "--", "true"],
    )
    .await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let out = run_on("exec", &url, &["tls", "--", "true"]).await;
    assert_eq!(code(&out), 69, "{}", stderr(&out));
    let missing = dir.join("missing.pem");
    let out = run_on(
        "exec",
        &url,
        &["--tls-ca", missing.to_str().unwrap(), "tls", "--", "true"],
    )
    .await;
    assert_eq!(code(&out), 64, "{}", stderr(&out));
}

#[tokio::test]
async fn sync_replicas_runs_with_a_replica_and_exits_75_without_one() {
    // Diskless sync starts after a 5 s delay by default; one replica here.
    let primary = RedisServer::start_with(&["--repl-diskless-sync-delay", "0"]);
    let mut replica =
        RedisServer::start_with(&["--replicaof", "127.0.0.1", &primary.port.to_string()]);
    wait_until(Duration::from_secs(20), "replica in sync", || {
        replica
            .info("replication")
            .contains("master_link_status:up")
    });
    let url = [primary.url()];
    let out = run_on(
        "exec",
        &url,
        &["--sync-replicas", "1", "replicated", "--", "true"],
    )
    .await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    replica.stop();
    let out = run_on(
        "exec",
        &url,
        &[
            "--sync-replicas",
            "1",
            "--ttl",
            "2",
            "--timeout",
            "1",
            "alone",
            "--",
            "sh",
            "-c",
            "echo ran",
        ],
    )
    .await;
    assert_eq!(code(&out), 75, "{}", stderr(&out));
    assert!(stderr(&out).contains("replicas"), "{}", stderr(&out));
    assert!(out.stdout.is_empty(), "the command never ran");
    let out = run_on("exec", &url, &["--sync-replicas", "0", "x", "--", "true"]).await;
    assert_eq!(code(&out), 64, "{}", stderr(&out));
}

#[tokio::test]
async fn fair_exec_runs_queued_commands_in_arrival_order() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let fair = LockOptions::default().fair(true);
    let holder = client.lock_with("line", fair).unwrap();
    holder.acquire(Wait::Once).await.unwrap();
    let dir = scratch("fair");
    let log = dir.join("order");
    let mut children = Vec::new();
    for id in 0..3 {
        let script = format!("echo {id} >> {}", log.display());
        children.push(
            rlock(&redis)
                .args(["exec", "--fair", "line", "--", "sh", "-c", &script])
                .spawn()
                .unwrap(),
        );
        // Each one queued before the next starts: arrival order is known.
        let deadline = Instant::now() + Duration::from_secs(10);
        while holder.state().await.unwrap().waiting != id + 1 {
            assert!(Instant::now() < deadline, "rlock exec {id} never queued");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    holder.release().await.unwrap();
    for child in children {
        let status = tokio::time::timeout(Duration::from_secs(10), child.wait_with_output())
            .await
            .unwrap()
            .unwrap()
            .status;
        assert!(status.success());
    }
    let order = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        order.split_whitespace().collect::<Vec<_>>(),
        ["0", "1", "2"]
    );
}

#[tokio::test]
async fn fair_exec_over_several_masters_is_a_usage_error() {
    let servers = Masters::start(3);
    let out = run_on("exec", &servers.urls(), &["--fair", "x", "--", "true"]).await;
    assert_eq!(code(&out), 64, "{}", stderr(&out));
    assert!(stderr(&out).contains("fair"), "{}", stderr(&out));
}

#[tokio::test]
async fn the_command_is_stopped_when_rlock_itself_is_killed() {
    let redis = RedisServer::start();
    let cmd = trapping("orphan", "orphaned");
    let mut child = rlock(&redis)
        .args(["exec", "orphan", "--", "sh", "-c", &cmd.script])
        .spawn()
        .unwrap();
    cmd.started().await;
    child.kill().await.unwrap(); // SIGKILL to rlock alone, not to its command
    let term = &cmd.term;
    assert!(
        eventually(Duration::from_secs(5), || {
            std::fs::read_to_string(term).is_ok_and(|t| t.trim() == "orphaned")
        })
        .await,
        "the command ran on after rlock died"
    );
}

#[tokio::test]
async fn a_waiter_stopped_by_a_signal_leaves_the_line_before_it_exits() {
    let redis = RedisServer::start();
    let _holder = held_elsewhere(&redis, "held").await;
    for (signal, code) in [
        (nix::sys::signal::Signal::SIGTERM, 143),
        (nix::sys::signal::Signal::SIGINT, 130),
    ] {
        let child = rlock(&redis)
            .args(["exec", "--fair", "held", "--", "true"])
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let in_line = eventually(Duration::from_secs(10), || {
            redis.conn().llen::<_, usize>("rlock:{held}:queue").unwrap() == 1
        })
        .await;
        assert!(in_line, "the waiting rlock never stood in line");
        let pid = nix::unistd::Pid::from_raw(child.id().unwrap() as i32);
        nix::sys::signal::kill(pid, signal).unwrap();
        let out = finished(child).await;
        assert_eq!(out.status.code(), Some(code), "{}", stderr(&out));
        // Gone from the line by the time it exited: inspection shows no
        // waiter that nobody is.
        let line: usize = redis.conn().llen("rlock:{held}:queue").unwrap();
        assert_eq!(line, 0, "a waiter left in line after {signal}");
    }
}

#[tokio::test]
async fn once_runs_a_job_on_one_machine_per_period_and_the_others_skip_at_once() {
    let redis = RedisServer::start();
    let dir = scratch("once");
    let ran = dir.join("ran");
    // Three "machines" whose cron fires at once: CMD appends a line.
    let job = format!("echo $RLOCK_FENCING_TOKEN >> {}; sleep 0.5", ran.display());
    let calls: Vec<_> = (0..3)
        .map(|_| {
            rlock(&redis)
                .args(["once", "--at-least", "2", "nightly-report", "-c", &job])
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for call in calls {
        let out = finished(call).await;
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    }
    let lines = std::fs::read_to_string(&ran).unwrap();
    assert_eq!(lines.lines().count(), 1, "ran {lines:?}");
    // Within --at-least of its start: skipped, exit --skip-exit's CODE.
    let out = run(
        &redis,
        &[
            "once",
            "--at-least",
            "2",
            "--skip-exit",
            "3",
            "nightly-report",
            "--",
            "true",
        ],
    )
    .await;
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    let pttl: i64 = redis.conn().pttl("rlock:{nightly-report}").unwrap();
    assert!((1..=2000).contains(&pttl), "kept for {pttl} ms");
    // After it, the next one runs, under a larger token.
    assert!(
        eventually(Duration::from_secs(5), || {
            !redis
                .conn()
                .exists::<_, bool>("rlock:{nightly-report}")
                .unwrap()
        })
        .await
    );
    let out = run(
        &redis,
        &["once", "--at-least", "2", "nightly-report", "-c", &job],
    )
    .await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let tokens: Vec<u64> = std::fs::read_to_string(&ran)
        .unwrap()
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect();
    assert_eq!(tokens.len(), 2);
    assert!(tokens[1] > tokens[0], "{tokens:?}");
    // Bad bounds are usage errors.
    let out = run(
        &redis,
        &[
            "once",
            "--at-least",
            "10",
            "--at-most",
            "5",
            "x",
            "--",
            "true",
        ],
    )
    .await;
    assert_eq!(code(&out), 64, "{}", stderr(&out));
    assert!(stderr(&out).contains("--at-least"), "{}", stderr(&out));
}

/// clap's own errors (an unknown flag, a missing argument, a value of the
/// wrong type, a misspelt subcommand) read like every other error of
/// `rlock`: one line starting `rlock: `, exit 64, its hint kept.
#[tokio::test]
async fn every_usage_error_is_one_line_starting_rlock_with_its_hint() {
    let redis = RedisServer::start();
    let rows: [(&[&str], &str); 5] = [
        (&["exec", "--bogus", "x", "true"], "--bogus"),
        (&["status"], "<NAME>"),
        (&["exec", "--ttl", "abc", "x", "true"], "--ttl"),
        (&["exec", "--tll", "5", "x", "true"], "--ttl"),
        (&["stauts", "x"], "status"),
    ];
    for (args, hint) in rows {
        let out = run(&redis, args).await;
        let err = stderr(&out);
        assert_eq!(code(&out), 64, "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("rlock: "), "{args:?}: {err}");
        assert!(err.contains(hint), "{args:?} hints at {hint}: {err}");
        assert!(err.contains("--help"), "{args:?}: {err}");
    }
    // Help is no error: on stdout, exit 0.
    let out = run(&redis, &["exec", "--help"]).await;
    assert_eq!(code(&out), 0);
    assert!(String::from_utf8_lossy(&out.stdout).contains("Usage:"));
}

/// A cache over several masters (a Redlock) is refused before any I/O:
/// the same usage error whether the masters are up or down.
#[tokio::test]
async fn cached_over_several_masters_is_refused_before_connecting() {
    let down: Vec<String> = (0..3)
        .map(|_| format!("redis://127.0.0.1:{}", free_port()))
        .collect();
    let up = Masters::start(3);
    for urls in [down, up.urls()] {
        for (sub, args) in [
            ("cached", &["--ttl", "5", "k", "--", "echo", "v"][..]),
            ("invalidate", &["k"][..]),
        ] {
            let out = run_on(sub, &urls, args).await;
            assert_eq!(code(&out), 64, "{sub} {urls:?}: {}", stderr(&out));
            assert!(stderr(&out).contains("not Redlock"), "{}", stderr(&out));
        }
    }
}
