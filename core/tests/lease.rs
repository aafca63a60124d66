//! Leases: they end without a watchdog, the watchdog keeps them alive,
//! `max_hold` caps them, and nothing renews a lock after its release.

use std::time::Duration;

use redis::Commands;
use rlock_core::{Client, LockOptions, LostReason, Wait};
use rlock_test_support::{eventually, RedisServer};

fn pttl(redis: &RedisServer, key: &str) -> i64 {
    redis.conn().pttl(key).unwrap()
}

#[tokio::test]
async fn without_auto_renew_the_lease_ends_and_the_holder_is_told() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let opts = LockOptions::default()
        .ttl(Duration::from_millis(300))
        .auto_renew(false);
    let lock = client.lock_with("job", opts).unwrap();
    lock.acquire(Wait::Once).await.unwrap();
    let lost = tokio::time::timeout(Duration::from_secs(3), lock.lost_signal())
        .await
        .unwrap();
    assert_eq!(lost, Some(LostReason::LeaseEnded));
    assert!(
        eventually(Duration::from_secs(2), || pttl(&redis, "rlock:{job}") == -2).await,
        "the key expires in Redis too"
    );
}

#[tokio::test]
async fn the_watchdog_keeps_a_300ms_lease_alive_for_2s() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let opts = LockOptions::default().ttl(Duration::from_millis(300));
    let lock = client.lock_with("kept", opts).unwrap();
    lock.acquire(Wait::Once).await.unwrap();
    let until = std::time::Instant::now() + Duration::from_secs(2);
    while std::time::Instant::now() < until {
        let left = pttl(&redis, "rlock:{kept}");
        assert!(left > 0, "lease ran out while held (pttl {left})");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(lock.lost(), None);
    assert!(lock.owned().await.unwrap());
    lock.release().await.unwrap();
}

#[tokio::test]
async fn max_hold_stops_renewal_and_reports_the_loss() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let opts = LockOptions::default()
        .ttl(Duration::from_millis(300))
        .max_hold(Some(Duration::from_millis(800)));
    let lock = client.lock_with("capped", opts).unwrap();
    let start = std::time::Instant::now();
    lock.acquire(Wait::Once).await.unwrap();
    let lost = tokio::time::timeout(Duration::from_secs(3), lock.lost_signal())
        .await
        .unwrap();
    let held_for = start.elapsed();
    assert_eq!(lost, Some(LostReason::MaxHold));
    assert!(
        held_for >= Duration::from_millis(750),
        "renewed past 300 ms, held {held_for:?}"
    );
    assert!(
        eventually(Duration::from_secs(1), || pttl(&redis, "rlock:{capped}")
            == -2)
        .await,
        "the lease ends in Redis by max_hold"
    );
}

#[tokio::test]
async fn after_release_no_renewal_touches_the_key_again() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let opts = LockOptions::default().ttl(Duration::from_millis(300));
    let lock = client.lock_with("done", opts).unwrap();
    lock.acquire(Wait::Once).await.unwrap();
    // Let at least one renewal happen first, so the loop is known to run.
    let before = redis.calls("evalsha");
    assert!(
        eventually(Duration::from_secs(2), || redis.calls("evalsha") > before).await,
        "the watchdog renews while held"
    );
    lock.release().await.unwrap();
    // Put the same owner's hash back: a watchdog still renewing it would keep
    // it alive; a stopped one lets its 300 ms lease run out.
    let _: () = redis::cmd("HSET")
        .arg("rlock:{done}")
        .arg(&["owner", lock.owner(), "count", "1", "fence", "1"])
        .query(&mut redis.conn())
        .unwrap();
    let _: () = redis.conn().pexpire("rlock:{done}", 300).unwrap();
    let evalsha = redis.calls("evalsha");
    assert!(
        eventually(Duration::from_secs(2), || pttl(&redis, "rlock:{done}")
            == -2)
        .await,
        "the key expired on its own"
    );
    assert_eq!(
        redis.calls("evalsha"),
        evalsha,
        "no script ran after the release"
    );
}

#[tokio::test]
async fn extend_resets_the_lease_and_keeps_it_for_renewals() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let opts = LockOptions::default()
        .ttl(Duration::from_millis(500))
        .auto_renew(false);
    let lock = client.lock_with("ext", opts).unwrap();
    lock.acquire(Wait::Once).await.unwrap();
    lock.extend(Some(Duration::from_secs(20))).await.unwrap();
    let left = pttl(&redis, "rlock:{ext}");
    assert!(left > 10_000, "pttl {left}");
    lock.release().await.unwrap();
    let err = lock.extend(None).await.unwrap_err();
    assert_eq!(err.category(), "not owner");
}
