//! The wire: the keys of DESIGN.md, two commands per uncontended cycle, and
//! scripts that survive SCRIPT FLUSH.

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
