//! A refused release or extend says why the owner does not hold the lock:
//! it never acquired it, it released it already, its lease ended, or another
//! owner holds it now. The request sent to Redis is the same in every case;
//! the reason combines Redis' answer with what the client knows of the
//! owner's own holdings.

use std::time::Duration;

use redis::Commands;
use rlock_core::{Client, Error, Lock, LockOptions, NotOwnedReason, Wait};
use rlock_test_support::{eventually, RedisServer};

/// Why an operation was refused; it must have been.
fn refused<T: std::fmt::Debug>(r: Result<T, Error>) -> NotOwnedReason {
    match r {
        Err(Error::NotOwned { reason, .. }) => reason,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// The reasons a release and then an extend of `lock` are refused for.
async fn refusals(lock: &Lock) -> (NotOwnedReason, NotOwnedReason) {
    let released = refused(lock.release().await);
    let extended = refused(lock.extend(None).await);
    (released, extended)
}

/// A lease that ends soon, not renewed: the key disappears by itself.
fn short() -> LockOptions {
    LockOptions::default()
        .ttl(Duration::from_millis(100))
        .auto_renew(false)
}

async fn wait_gone(redis: &RedisServer, name: &str) {
    let key = format!("rlock:{{{name}}}");
    let gone = eventually(Duration::from_secs(3), || {
        !redis.conn().exists::<_, bool>(&key).unwrap()
    })
    .await;
    assert!(gone, "the 100 ms lease of {name} should have ended");
}

#[tokio::test]
async fn a_lock_never_acquired_is_not_acquired_by_this_owner_free_or_held() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let never = client.lock("never").unwrap();
    assert_eq!(
        refusals(&never).await,
        (NotOwnedReason::NotAcquired, NotOwnedReason::NotAcquired)
    );

    let holder = client.lock("never").unwrap();
    holder.acquire(Wait::Once).await.unwrap();
    let err = never.release().await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "lock \"never\" is not held by this owner: not acquired by this owner"
    );
    assert_eq!(
        refusals(&never).await,
        (NotOwnedReason::NotAcquired, NotOwnedReason::NotAcquired),
        "another owner's holding is none of this owner's"
    );
    assert!(holder.owned().await.unwrap(), "and stays untouched");
}

#[tokio::test]
async fn a_second_release_is_already_released_even_once_another_holds_it() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let lock = client.lock("twice").unwrap();
    lock.acquire(Wait::Once).await.unwrap();
    assert_eq!(lock.release().await.unwrap(), 0);
    assert_eq!(
        refusals(&lock).await,
        (
            NotOwnedReason::AlreadyReleased,
            NotOwnedReason::AlreadyReleased
        )
    );

    let other = Client::connect(&redis.url()).await.unwrap();
    let next = other.lock("twice").unwrap();
    next.acquire(Wait::Once).await.unwrap();
    assert_eq!(
        refusals(&lock).await,
        (
            NotOwnedReason::AlreadyReleased,
            NotOwnedReason::AlreadyReleased
        )
    );
    assert!(next.owned().await.unwrap());
}

#[tokio::test]
async fn a_holding_whose_key_is_gone_expired_then_is_already_released() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let extended = client.lock_with("ended", short()).unwrap();
    extended.acquire(Wait::Once).await.unwrap();
    wait_gone(&redis, "ended").await;
    assert_eq!(
        refused(extended.extend(None).await),
        NotOwnedReason::Expired
    );

    let released = client.lock_with("ended", short()).unwrap();
    released.acquire(Wait::Once).await.unwrap();
    wait_gone(&redis, "ended").await;
    assert_eq!(
        refusals(&released).await,
        (NotOwnedReason::Expired, NotOwnedReason::AlreadyReleased),
        "the refused release was reported: what follows is a second release"
    );
}

#[tokio::test]
async fn a_holding_another_owner_took_over_is_held_by_another() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let other = Client::connect(&redis.url()).await.unwrap();
    let lock = client.lock_with("taken", short()).unwrap();
    let rival = other.lock("taken").unwrap();

    lock.acquire(Wait::Once).await.unwrap();
    wait_gone(&redis, "taken").await;
    rival.acquire(Wait::Once).await.unwrap();
    assert_eq!(
        refused(lock.extend(None).await),
        NotOwnedReason::HeldByAnother
    );
    assert_eq!(
        refusals(&lock).await,
        (
            NotOwnedReason::HeldByAnother,
            NotOwnedReason::AlreadyReleased
        )
    );
    assert!(rival.owned().await.unwrap(), "the rival's holding stays");
}

/// Remembering releases costs a bounded table: a client that released many
/// names since tells a recent second release apart, and an old one no more.
#[tokio::test]
async fn releases_are_remembered_in_a_bounded_table() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let worker = |name: &str| {
        client
            .lock_as(name, LockOptions::default(), "worker")
            .unwrap()
    };
    for i in 0..2000 {
        let lock = worker(&format!("job-{i}"));
        lock.acquire(Wait::Once).await.unwrap();
        lock.release().await.unwrap();
    }
    assert_eq!(
        refusals(&worker("job-1999")).await.0,
        NotOwnedReason::AlreadyReleased
    );
    assert_eq!(
        refusals(&worker("job-0")).await.0,
        NotOwnedReason::NotAcquired,
        "the oldest releases are forgotten"
    );
}

/// Nested scopes of one owner whose lease ended: each scope ends with the
/// loss, the outer one too (not "already released": it released nothing).
#[tokio::test]
async fn every_nested_scope_of_a_lost_holding_ends_with_the_loss() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    for (name, taken_over) in [("nested-expired", false), ("nested-taken", true)] {
        let lock = client.lock_with(name, short()).unwrap();
        lock.acquire(Wait::Once).await.unwrap();
        lock.acquire(Wait::Once).await.unwrap();
        wait_gone(&redis, name).await;
        if taken_over {
            let other = client.lock(name).unwrap();
            other.acquire(Wait::Once).await.unwrap();
        }
        for scope in ["inner", "outer"] {
            match lock.finish().await {
                Err(Error::Lost { .. }) => {}
                other => panic!("{name}: the {scope} scope ended with {other:?}"),
            }
        }
        // Both scopes ended: a third release is one too many.
        assert_eq!(
            refused(lock.release().await),
            NotOwnedReason::AlreadyReleased,
            "{name}"
        );
    }
}

/// JavaScript's `await using` ends nested scopes with `finish_if_held`:
/// the outer one hears of the loss too.
#[tokio::test]
async fn finish_if_held_of_an_outer_scope_of_a_lost_holding_reports_the_loss() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let lock = client.lock_with("nested-using", short()).unwrap();
    lock.acquire(Wait::Once).await.unwrap();
    lock.acquire(Wait::Once).await.unwrap();
    wait_gone(&redis, "nested-using").await;
    for scope in ["inner", "outer"] {
        match lock.finish_if_held().await {
            Err(Error::Lost { .. }) => {}
            other => panic!("the {scope} scope ended with {other:?}"),
        }
    }
}
