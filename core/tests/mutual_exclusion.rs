//! The lock's first promise: one holder at a time, owner-checked release,
//! fencing tokens that only grow, re-entry by the same owner only.

use std::time::Duration;

use redis::Commands;
use rlock_core::{Client, Error, LockOptions, NotOwnedReason, Wait};
use rlock_test_support::{contend, eventually, RedisServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_tasks_incrementing_a_counter_non_atomically_never_lose_an_update() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let locks = (0..16).map(|_| client.lock("counter").unwrap()).collect();
    assert_eq!(contend(locks, 200, &redis.url()).await, 16 * 200);
}

#[tokio::test]
async fn a_release_by_another_owner_is_refused_and_the_lock_stays() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let holder = client.lock("report").unwrap();
    let other = client.lock("report").unwrap();
    holder.acquire(Wait::Once).await.unwrap();

    let refused = other.release().await.unwrap_err();
    assert!(
        matches!(
            refused,
            Error::NotOwned {
                reason: NotOwnedReason::NotAcquired,
                ..
            }
        ),
        "{refused:?}"
    );
    assert!(holder.owned().await.unwrap());
    let owner: String = redis.conn().hget("rlock:{report}", "owner").unwrap();
    assert_eq!(owner, holder.owner());
}

#[tokio::test]
async fn a_release_after_the_lease_ended_reports_expired_not_success() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let opts = LockOptions::default()
        .ttl(Duration::from_millis(100))
        .auto_renew(false);
    let lock = client.lock_with("short", opts).unwrap();
    lock.acquire(Wait::Once).await.unwrap();
    let gone = eventually(Duration::from_secs(3), || {
        !redis.conn().exists::<_, bool>("rlock:{short}").unwrap()
    })
    .await;
    assert!(gone, "the 100 ms lease should have ended");

    let err = lock.release().await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::NotOwned {
                reason: NotOwnedReason::Expired,
                ..
            }
        ),
        "{err:?}"
    );
}

#[tokio::test]
async fn fencing_tokens_grow_across_holders_and_stay_on_reentry() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let mut last = 0;
    for _ in 0..5 {
        let lock = client.lock("fenced").unwrap();
        let first = lock.acquire(Wait::Once).await.unwrap();
        assert!(
            first.fencing_token > last,
            "{} after {last}",
            first.fencing_token
        );
        assert_eq!(first.count, 1);
        let again = lock.acquire(Wait::Once).await.unwrap();
        assert_eq!(again.fencing_token, first.fencing_token);
        assert_eq!(again.count, 2);
        assert_eq!(lock.fencing_token(), Some(first.fencing_token));
        last = first.fencing_token;

        assert_eq!(lock.release().await.unwrap(), 1);
        assert!(lock.locked().await.unwrap(), "one re-entry is still held");
        assert_eq!(lock.release().await.unwrap(), 0);
        assert!(!lock.locked().await.unwrap());
        assert_eq!(lock.fencing_token(), None);
    }
    // The slot's counter, which no other name of this test shares.
    let counter_key = client.lock("fenced").unwrap().keys().fence.clone();
    let counter: u64 = redis.conn().get(counter_key).unwrap();
    assert_eq!(counter, last);
}

#[tokio::test]
async fn reentry_belongs_to_the_owner_alone() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let a = client.lock("nest").unwrap();
    let b = client.lock("nest").unwrap();
    a.acquire(Wait::Once).await.unwrap();
    assert_eq!(
        b.try_acquire().await.unwrap(),
        None,
        "another handle is another owner"
    );
    // The same owner unit through a new handle nests (what the bindings rely on).
    let a_again = client
        .lock_as("nest", LockOptions::default(), "unit-1")
        .unwrap();
    let a_unit = a.with_owner("unit-1");
    assert_eq!(a_unit.owner(), a_again.owner());
    assert_eq!(
        a_again.try_acquire().await.unwrap(),
        None,
        "unit-1 does not hold it yet"
    );
    assert_eq!(a.acquire(Wait::Once).await.unwrap().count, 2);
    assert!(a.owned().await.unwrap());
    assert!(!b.owned().await.unwrap());
}

#[tokio::test]
async fn owners_of_two_clients_never_collide() {
    let redis = RedisServer::start();
    let one = Client::connect(&redis.url()).await.unwrap();
    let two = Client::connect(&redis.url()).await.unwrap();
    assert_ne!(one.id(), two.id());
    let a = one
        .lock_as("shared", LockOptions::default(), "thread-1")
        .unwrap();
    let b = two
        .lock_as("shared", LockOptions::default(), "thread-1")
        .unwrap();
    a.acquire(Wait::Once).await.unwrap();
    assert_eq!(b.try_acquire().await.unwrap(), None);
}
