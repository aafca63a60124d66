//! A Redis that earlier builds used keeps a per-name fence counter
//! (`P:{NAME}:fence`): the first token issued for that name folds it into the
//! slot's counter and deletes it, so tokens keep growing across the upgrade,
//! through a fresh acquisition, a handoff, and on every Redlock master; until
//! then, what a client reads of the counter is at least it. And a value of
//! another type at a slot's counter does not stop its names being inspected.

use std::time::Duration;

use redis::Commands;
use rlock_core::{Client, ClientOptions, Keys, LockOptions, Wait};
use rlock_test_support::{finished, until_in_line, Masters, RedisServer};

fn keys(name: &str) -> Keys {
    Keys::new("rlock", name)
}

fn get(server: &RedisServer, key: &str) -> Option<u64> {
    server.conn().get(key).unwrap()
}

fn exists(server: &RedisServer, key: &str) -> bool {
    server.conn().exists(key).unwrap()
}

fn set(server: &RedisServer, key: &str, value: u64) {
    let _: () = server.conn().set(key, value).unwrap();
}

/// `acquire.lua` sent as another client following docs/protocol.md sends it,
/// for `owner` of `name`, not joining the line: its reply.
fn acquire_script(server: &RedisServer, name: &str, owner: &str) -> Vec<i64> {
    let k = keys(name);
    let source: String = ["common.lua", "mutex/queue.lua", "mutex/acquire.lua"]
        .iter()
        .map(|f| {
            let path = format!("{}/lua/{f}", env!("CARGO_MANIFEST_DIR"));
            std::fs::read_to_string(path).unwrap() + "\n"
        })
        .collect();
    redis::Script::new(&source)
        .key(&k.lock)
        .key(&k.fence)
        .key(&k.queue)
        .key(&k.leases)
        .key(&k.legacy_fence)
        .arg(owner)
        .arg(30_000)
        .arg(0)
        .arg("0")
        .arg(&k.waiter_prefix)
        .arg("NUMSUB")
        .invoke(&mut server.conn())
        .unwrap()
}

#[tokio::test]
async fn the_first_token_after_an_upgrade_is_above_the_legacy_counter_which_is_then_gone() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let u = keys("u");
    set(&redis, &u.legacy_fence, 500);

    let lock = client.lock("u").unwrap();
    assert_eq!(lock.acquire(Wait::Once).await.unwrap().fencing_token, 501);
    assert!(!exists(&redis, &u.legacy_fence), "folded, then deleted");
    assert_eq!(get(&redis, &u.fence), Some(501));
    lock.release().await.unwrap();
    assert_eq!(lock.acquire(Wait::Once).await.unwrap().fencing_token, 502);

    // A slot counter already above the legacy one stays as it is: the
    // token is above both, and the legacy key goes all the same.
    let v = keys("v");
    set(&redis, &v.fence, 900);
    set(&redis, &v.legacy_fence, 700);
    let lock = client.lock("v").unwrap();
    assert_eq!(lock.acquire(Wait::Once).await.unwrap().fencing_token, 901);
    assert!(!exists(&redis, &v.legacy_fence));
}

#[tokio::test]
async fn until_the_fold_a_busy_attempt_and_the_state_report_at_least_the_legacy_counter() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let u = keys("u");
    // A holder of an earlier build: the same lock hash, its token from the
    // per-name counter; this slot's counter has issued less so far.
    set(&redis, &u.fence, 3);
    set(&redis, &u.legacy_fence, 500);
    let _: () = redis
        .conn()
        .hset_multiple(
            &u.lock,
            &[("owner", "old:1"), ("count", "1"), ("fence", "500")],
        )
        .unwrap();
    let _: () = redis.conn().pexpire(&u.lock, 30_000).unwrap();

    let state = client.lock("u").unwrap().state().await.unwrap();
    assert_eq!((state.fence, state.fence_counter), (Some(500), Some(500)));
    let busy = acquire_script(&redis, "u", "new:1");
    assert_eq!(busy[0], 0, "busy: {busy:?}");
    assert_eq!(busy[4], 500, "issued: {busy:?}");
    assert!(exists(&redis, &u.legacy_fence), "reads fold nothing");

    // The old holder lets go as its build did: the next token is above its.
    let _: () = redis.conn().del(&u.lock).unwrap();
    let lock = client.lock("u").unwrap();
    assert_eq!(lock.acquire(Wait::Once).await.unwrap().fencing_token, 501);
    let state = lock.state().await.unwrap();
    assert_eq!(state.fence_counter, Some(501));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_handed_the_lock_gets_a_token_above_the_legacy_counter() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let fair = LockOptions::default().fair(true);
    let u = keys("u");
    let holder = client.lock_with("u", fair.clone()).unwrap();
    assert_eq!(holder.acquire(Wait::Once).await.unwrap().fencing_token, 1);
    // Written behind the holder's back, as an earlier build's INCR left it:
    // only the handoff's token can fold it.
    set(&redis, &u.legacy_fence, 500);
    let waiter = client.lock_with("u", fair).unwrap();
    let waiting = tokio::spawn(async move {
        waiter
            .acquire(Wait::For(Duration::from_secs(10)))
            .await
            .map(|held| held.fencing_token)
    });
    until_in_line(&holder, 1).await;

    holder.release().await.unwrap();
    let token = finished(waiting, Duration::from_secs(15)).await.unwrap();
    assert_eq!(token, 501);
    assert!(!exists(&redis, &u.legacy_fence));
    assert_eq!(get(&redis, &u.fence), Some(501));
}

#[tokio::test]
async fn each_redlock_master_folds_its_own_legacy_counter() {
    let masters = Masters::start(3);
    let u = keys("u");
    for (master, legacy) in masters.iter().zip([100, 500, 300]) {
        set(master, &u.legacy_fence, legacy);
    }
    let client = Client::connect_urls(&masters.urls(), ClientOptions::default())
        .await
        .unwrap();
    let lock = client.lock("u").unwrap();

    // The largest token of the majority that granted it (the third
    // master's answer may come after the decision): 101 never wins, as
    // every majority holds the master of 500 or that of 300.
    let first = lock.acquire(Wait::Once).await.unwrap().fencing_token;
    assert!([301, 501].contains(&first), "{first}");
    // Each master that issued a token folded its own legacy counter into
    // it; one the decision left behind may not have been asked (a majority
    // decides), and then keeps its legacy counter, untouched.
    let mut folded = 0;
    for (master, (legacy, issued)) in masters.iter().zip([(100, 101), (500, 501), (300, 301)]) {
        // One read of both: a request still on its way applies before or after it.
        let (counter, left): (Option<u64>, Option<u64>) =
            master.conn().mget(&[&u.fence, &u.legacy_fence]).unwrap();
        match counter {
            Some(n) => {
                assert_eq!((n, left), (issued, None));
                folded += 1;
            }
            None => assert_eq!(left, Some(legacy)),
        }
    }
    assert!(folded >= 2, "a majority issued the token");
    lock.release().await.unwrap();
    // Again the largest of a majority's counters, each folded once: a
    // master left out the first time still issues its legacy counter + 1,
    // so under Redlock the second token may be the smaller one (tokens are
    // not a global order there; docs/deployments.md).
    let second = lock.acquire(Wait::Once).await.unwrap().fencing_token;
    assert!([301, 302, 501, 502].contains(&second), "{second}");
    assert_ne!(second, first);
}

#[tokio::test]
async fn a_legacy_key_that_holds_no_integer_is_left_alone() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let (u, v) = (keys("u"), keys("v"));
    let _: () = redis.conn().set(&u.legacy_fence, "not a number").unwrap();
    let _: () = redis.conn().rpush(&v.legacy_fence, "a list").unwrap();

    for (name, k) in [("u", &u), ("v", &v)] {
        let lock = client.lock(name).unwrap();
        let token = lock.acquire(Wait::Once).await.unwrap().fencing_token;
        assert_eq!(get(&redis, &k.fence), Some(token), "{name}");
        assert_eq!(lock.state().await.unwrap().fence_counter, Some(token));
        lock.release().await.unwrap();
        assert!(exists(&redis, &k.legacy_fence), "{name}");
    }
    let text: String = redis.conn().get(&u.legacy_fence).unwrap();
    assert_eq!(text, "not a number");
}

#[tokio::test]
async fn a_slot_counter_of_another_type_still_lets_every_name_of_the_slot_be_inspected() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    // Two names of one slot (their hash tag is `a`): one counter.
    let (ab, ac) = (keys("a}b"), keys("a}c"));
    assert_eq!(ab.fence, ac.fence);
    let _: () = redis.conn().rpush(&ab.fence, "not a counter").unwrap();

    for name in ["a}b", "a}c"] {
        let lock = client.lock(name).unwrap();
        let state = lock.state().await.unwrap();
        assert!(!state.held, "{name}");
        assert_eq!(state.fence_counter, None, "{name}");
        assert!(!lock.locked().await.unwrap(), "{name}");
    }
    // Held (through a key of another type): still answered, as held.
    let _: () = redis.conn().set(&ac.lock, "older lock").unwrap();
    let state = client.lock("a}c").unwrap().state().await.unwrap();
    assert!(state.held);
    assert_eq!(state.fence_counter, None);
}
