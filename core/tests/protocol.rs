//! The wire: the keys of DESIGN.md, two commands per uncontended cycle (and
//! what their scripts run), scripts that survive SCRIPT FLUSH, and the
//! owner-checked scripts' answers as another client sending them sees them.

mod support;

use redis::Commands;
use rlock_core::{Client, ClientOptions, Wait};
use support::RedisServer;

#[tokio::test]
async fn an_uncontended_cycle_sends_exactly_two_commands() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let lock = client.lock("cycle").unwrap();
    // Warm up: the first call of each script may add a SCRIPT LOAD.
    lock.acquire(Wait::Once).await.unwrap();
    lock.release().await.unwrap();

    let mut monitor = redis.monitor();
    for _ in 0..50 {
        lock.acquire(Wait::Once).await.unwrap();
        lock.release().await.unwrap();
    }
    let sent = monitor.mark();
    assert_eq!(sent.len(), 100, "{sent:?}");
    assert!(sent.iter().all(|c| c == "evalsha"), "{sent:?}");
}

#[tokio::test]
async fn script_flush_between_calls_does_not_break_the_next_call() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let lock = client.lock("flush").unwrap();
    lock.acquire(Wait::Once).await.unwrap();
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query(&mut redis.conn())
        .unwrap();
    lock.extend(None).await.unwrap();
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query(&mut redis.conn())
        .unwrap();
    lock.release().await.unwrap();
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query(&mut redis.conn())
        .unwrap();
    lock.acquire(Wait::Once).await.unwrap();
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query(&mut redis.conn())
        .unwrap();
    assert!(lock.owned().await.unwrap());
}

#[tokio::test]
async fn keys_follow_the_documented_layout() {
    let redis = RedisServer::start();
    let options = ClientOptions::default().prefix("app");
    let client = Client::connect_with(&redis.url(), options).await.unwrap();
    let lock = client.lock("product:1001").unwrap();
    let held = lock.acquire(Wait::Once).await.unwrap();
    let mut c = redis.conn();
    let fields: std::collections::HashMap<String, String> =
        c.hgetall("app:{product:1001}").unwrap();
    assert_eq!(fields["owner"], lock.owner());
    assert_eq!(fields["count"], "1");
    assert_eq!(fields["fence"], held.fencing_token.to_string());
    assert!(lock.owner().starts_with(client.id()));
    let counter: u64 = c.get("app:{product:1001}:fence").unwrap();
    assert_eq!(counter, held.fencing_token);
    let fence_ttl: i64 = c.pttl("app:{product:1001}:fence").unwrap();
    assert_eq!(fence_ttl, -1, "the fence counter never expires");
    let lease: i64 = c.pttl("app:{product:1001}").unwrap();
    assert!(
        lease > 29_000 && lease <= 30_000,
        "default lease 30 s, pttl {lease}"
    );
    let state = lock.state().await.unwrap();
    assert_eq!(state.fence, Some(held.fencing_token));
    assert_eq!(state.count, 1);
    assert_eq!(state.fence_counter, Some(held.fencing_token));
}

/// A script as the README tells another client to send it: the helper files
/// it calls first, then the script, each followed by a newline.
fn script(files: &[&str]) -> redis::Script {
    let source: String = files
        .iter()
        .map(|f| {
            let path = format!("{}/../lua/{f}", env!("CARGO_MANIFEST_DIR"));
            std::fs::read_to_string(&path).unwrap() + "\n"
        })
        .collect();
    redis::Script::new(&source)
}

#[test]
fn the_owner_checked_scripts_answer_gone_or_someone_elses_and_touch_nothing() {
    let redis = RedisServer::start();
    let mut c = redis.conn();
    let release = script(&["holding.lua", "queue.lua", "release.lua"]);
    let extend = script(&["holding.lua", "extend.lua"]);
    let answers = |c: &mut redis::Connection, name: &str| -> (i64, i64) {
        let key = format!("rlock:{{{name}}}");
        let released: i64 = release
            .key(&key)
            .key(format!("{key}:released"))
            .key(format!("{key}:fence"))
            .key(format!("{key}:queue"))
            .key(format!("{key}:leases"))
            .arg("me:1")
            .arg(30_000)
            .arg("PUBLISH")
            .arg(format!("{key}:w:"))
            .arg("NUMSUB")
            .invoke(c)
            .unwrap();
        let extended: i64 = extend.key(&key).arg("me:1").arg(30_000).invoke(c).unwrap();
        (released, extended)
    };
    assert_eq!(answers(&mut c, "gone"), (-1, -1), "no key: gone");

    let _: () = c.set("rlock:{legacy}", "token").unwrap();
    assert_eq!(answers(&mut c, "legacy"), (-2, -2), "a plain SET NX lock");
    let kept: String = c.get("rlock:{legacy}").unwrap();
    assert_eq!(kept, "token");

    let _: () = c
        .hset_multiple("rlock:{theirs}", &[("owner", "them:1"), ("count", "1")])
        .unwrap();
    assert_eq!(answers(&mut c, "theirs"), (-2, -2), "another owner's");
    let _: () = c.hset("rlock:{foreign}", "field", "value").unwrap();
    assert_eq!(
        answers(&mut c, "foreign"),
        (-2, -2),
        "a hash without an owner"
    );
    let owner: String = c.hget("rlock:{theirs}", "owner").unwrap();
    let field: String = c.hget("rlock:{foreign}", "field").unwrap();
    assert_eq!((owner.as_str(), field.as_str()), ("them:1", "value"));
    let ttls: (i64, i64) = (
        c.pttl("rlock:{theirs}").unwrap(),
        c.pttl("rlock:{foreign}").unwrap(),
    );
    assert_eq!(ttls, (-1, -1), "no lease was set on keys that are not ours");
}

#[tokio::test]
async fn an_uncontended_cycle_runs_eight_commands_inside_its_scripts() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let lock = client.lock("cost").unwrap();
    lock.acquire(Wait::Once).await.unwrap();
    lock.release().await.unwrap();

    let info = || -> u64 {
        let stats: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(&mut redis.conn())
            .unwrap();
        stats
            .lines()
            .filter(|l| l.starts_with("cmdstat_") && !l.starts_with("cmdstat_info:"))
            .filter_map(|l| l.split(',').next()?.split_once("calls="))
            .map(|(_, n)| n.parse::<u64>().unwrap())
            .sum()
    };
    let before = info();
    for _ in 0..50 {
        lock.acquire(Wait::Once).await.unwrap();
        lock.release().await.unwrap();
    }
    // Acquire: EXISTS, INCR, HSET, PEXPIRE. Release: HMGET, LINDEX, DEL,
    // PUBLISH. Plus the two EVALSHA themselves.
    assert_eq!(info() - before, 50 * 10);
}
