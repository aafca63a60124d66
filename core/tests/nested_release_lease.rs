//! A nested release must leave the lease the holder believes it has: the
//! lease its acquisition or its last extend set, never past `max_hold`.

use std::time::Duration;

use redis::Commands;
use rlock_core::{Client, Error, LockOptions, Wait};
use rlock_test_support::RedisServer;

#[tokio::test]
async fn a_nested_release_keeps_an_extended_lease_so_no_one_enters_unannounced() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let opts = LockOptions::default()
        .ttl(Duration::from_millis(300))
        .auto_renew(false);
    let lock = client.lock_with("nested", opts).unwrap();
    lock.acquire(Wait::Once).await.unwrap();
    lock.acquire(Wait::Once).await.unwrap();
    lock.extend(Some(Duration::from_secs(3))).await.unwrap();
    assert_eq!(lock.release().await.unwrap(), 1);

    // The holder now believes its lease runs 3 s from the release.
    let left: i64 = redis.conn().pttl("rlock:{nested}").unwrap();
    assert!(
        left > 2_500,
        "the nested release cut the lease to {left} ms"
    );

    // Whoever gets in next, the holder must have been told first.
    let other = client.lock("nested").unwrap();
    match other.acquire(Wait::For(Duration::from_millis(1500))).await {
        Ok(_) => assert!(
            lock.lost().is_some(),
            "another owner holds the lock while its holder was never told it lost it"
        ),
        Err(Error::Timeout { .. }) => {}
        Err(e) => panic!("{e:?}"),
    }
}

#[tokio::test]
async fn a_nested_release_never_stretches_the_lease_past_max_hold() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let opts = LockOptions::default()
        .ttl(Duration::from_secs(5))
        .max_hold(Some(Duration::from_millis(500)))
        .auto_renew(false);
    let lock = client.lock_with("capped", opts).unwrap();
    lock.acquire(Wait::Once).await.unwrap();
    lock.acquire(Wait::Once).await.unwrap();
    assert_eq!(lock.release().await.unwrap(), 1);
    let left: i64 = redis.conn().pttl("rlock:{capped}").unwrap();
    assert!(
        (0..=500).contains(&left),
        "max_hold is 500 ms, but the lease now runs {left} ms"
    );
}

/// The case the sequence property shrank to (with the nested release checked
/// exactly): one owner, unit "worker", through two handles with different
/// options. The second handle's nested release set the lease to its own ttl
/// (90 s), past the holding's 60 s lease and past its own 40 s `max_hold`.
#[tokio::test]
async fn a_nested_release_through_another_handle_of_the_owner_keeps_the_holdings_lease() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let secs = Duration::from_secs;
    let first = client
        .lock_as("shared", LockOptions::default().ttl(secs(60)), "worker")
        .unwrap();
    let second_opts = LockOptions::default()
        .ttl(secs(90))
        .max_hold(Some(secs(40)));
    let second = client.lock_as("shared", second_opts, "worker").unwrap();
    first.acquire(Wait::Once).await.unwrap();
    first.acquire(Wait::Once).await.unwrap();
    assert_eq!(second.release().await.unwrap(), 1);
    let left: i64 = redis.conn().pttl("rlock:{shared}").unwrap();
    assert!(
        left <= 60_000,
        "the holding's lease is 60 s, but the lease now runs {left} ms"
    );
}
