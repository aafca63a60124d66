//! The wire: the keys of docs/protocol.md, two commands per uncontended cycle (and
//! what their scripts run), scripts that survive SCRIPT FLUSH, and the
//! owner-checked scripts' answers as another client sending them sees them.

use redis::Commands;
use rlock_core::{Client, ClientOptions, Wait};
use rlock_test_support::RedisServer;

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
    // The counter of the name's slot (181), tagged with the smallest number
    // of that slot; it issued this token, the first taken in that slot.
    let counter: u64 = c.get("app:fence{47183}").unwrap();
    assert_eq!(counter, held.fencing_token);
    let fence_ttl: i64 = c.pttl("app:fence{47183}").unwrap();
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

    // Released: nothing of the name is left, only its slot's counter.
    lock.release().await.unwrap();
    assert_eq!(redis.data_keys(), ["app:fence{47183}"]);
}

/// A script as the README tells another client to send it: the helper files
/// it calls first, then the script, each followed by a newline.
fn script(files: &[&str]) -> redis::Script {
    let source: String = files
        .iter()
        .map(|f| {
            let path = format!("{}/lua/{f}", env!("CARGO_MANIFEST_DIR"));
            std::fs::read_to_string(&path).unwrap() + "\n"
        })
        .collect();
    redis::Script::new(&source)
}

/// `release.lua` and `extend.lua` for owner `me:1` of lock `name`, sent as
/// another client would send them.
fn release_and_extend(c: &mut redis::Connection, name: &str) -> redis::RedisResult<(i64, i64)> {
    let key = format!("rlock:{{{name}}}");
    let fence = rlock_core::Keys::new("rlock", name).fence;
    let release = script(&[
        "common.lua",
        "mutex/holding.lua",
        "mutex/queue.lua",
        "mutex/release.lua",
    ]);
    let released: i64 = release
        .key(&key)
        .key(format!("{key}:released"))
        .key(fence)
        .key(format!("{key}:queue"))
        .key(format!("{key}:leases"))
        .arg("me:1")
        .arg(30_000)
        .arg("PUBLISH")
        .arg(format!("{key}:w:"))
        .arg("NUMSUB")
        .invoke(c)?;
    let extended: i64 = script(&["mutex/holding.lua", "mutex/extend.lua"])
        .key(&key)
        .arg("me:1")
        .arg(30_000)
        .invoke(c)?;
    Ok((released, extended))
}

#[test]
fn the_owner_checked_scripts_answer_gone_or_someone_elses_and_touch_nothing() {
    let redis = RedisServer::start();
    let mut c = redis.conn();
    let answers = |name: &str| release_and_extend(&mut redis.conn(), name).unwrap();
    let published_before = redis.calls("publish");
    assert_eq!(answers("gone"), (-1, -1), "no key: gone");
    let gone: bool = c.exists("rlock:{gone}").unwrap();
    assert!(!gone, "a gone lock stays gone");

    let _: () = c.set("rlock:{legacy}", "token").unwrap();
    assert_eq!(answers("legacy"), (-2, -2), "a plain SET NX lock");
    let kept: String = c.get("rlock:{legacy}").unwrap();
    assert_eq!(kept, "token");

    let _: () = c
        .hset_multiple("rlock:{theirs}", &[("owner", "them:1"), ("count", "2")])
        .unwrap();
    assert_eq!(answers("theirs"), (-2, -2), "another owner's");
    let _: () = c.hset("rlock:{foreign}", "field", "value").unwrap();
    assert_eq!(answers("foreign"), (-2, -2), "a hash without an owner");
    let theirs: (String, u32) = redis::cmd("HMGET")
        .arg("rlock:{theirs}")
        .arg("owner")
        .arg("count")
        .query(&mut c)
        .unwrap();
    let field: String = c.hget("rlock:{foreign}", "field").unwrap();
    assert_eq!(theirs, ("them:1".to_owned(), 2), "their holding unchanged");
    assert_eq!(field, "value");
    let ttls: (i64, i64) = (
        c.pttl("rlock:{theirs}").unwrap(),
        c.pttl("rlock:{foreign}").unwrap(),
    );
    assert_eq!(ttls, (-1, -1), "no lease was set on keys that are not ours");
    assert_eq!(
        redis.calls("publish"),
        published_before,
        "nothing announced"
    );
}

#[test]
fn a_failure_other_than_a_wrong_type_is_an_error_not_someone_elses_lock() {
    let redis = RedisServer::start();
    let _: () = redis::cmd("HSET")
        .arg("rlock:{mine}")
        .arg("owner")
        .arg("me:1")
        .arg("count")
        .arg(1)
        .query(&mut redis.conn())
        .unwrap();
    // A user allowed everything but the read the owner check makes.
    redis.add_user("nohmget", "pw", &["~*", "&*", "+@all", "-hmget"]);
    let mut c = redis::Client::open(redis.url_as("nohmget", "pw"))
        .unwrap()
        .get_connection()
        .unwrap();
    let err = release_and_extend(&mut c, "mine").unwrap_err();
    // The refusal's wording is the server's: Redis 7 and Valkey say the user
    // "can't run this command", Redis 8 that it "has no permissions to run" it.
    let refused = err.to_string();
    assert!(
        refused.contains("can't run this command") || refused.contains("no permissions to run"),
        "{err}"
    );
    let held: String = redis.conn().hget("rlock:{mine}", "owner").unwrap();
    assert_eq!(held, "me:1", "the lock was left alone");
}

#[tokio::test]
async fn an_uncontended_cycle_runs_eight_commands_inside_its_scripts() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let lock = client.lock("cost").unwrap();
    lock.acquire(Wait::Once).await.unwrap();
    lock.release().await.unwrap();

    // One connection for both readings: connecting sends commands of its own.
    let mut c = redis.conn();
    let mut info = || -> u64 {
        let stats: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(&mut c)
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
    // Acquire: EXISTS, INCR, TIME (when it was taken, for inspection),
    // HSET, PEXPIRE. Release: HMGET, LINDEX, DEL, PUBLISH. Plus the two
    // EVALSHA themselves.
    assert_eq!(info() - before, 50 * 11);
}
