//! Lost locks: the holder is told the moment its lease ends without it.

use std::time::{Duration, Instant};

use redis::Commands;
use rlock_core::{Client, ClientOptions, Error, Lock, LockOptions, LostReason, Wait};
use rlock_test_support::{eventually, RedisServer};

#[tokio::test]
async fn a_key_deleted_from_outside_is_reported_lost_within_a_renewal_period() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let opts = LockOptions::default().ttl(Duration::from_millis(900));
    let lock = client.lock_with("victim", opts).unwrap();
    lock.acquire(Wait::Once).await.unwrap();
    let _: () = redis.conn().del("rlock:{victim}").unwrap();
    let deleted = Instant::now();
    // lease/3 = 300 ms, plus a generous margin for a loaded machine.
    let lost = tokio::time::timeout(Duration::from_millis(1500), lock.lost_signal())
        .await
        .expect("not reported lost in time");
    assert_eq!(lost, Some(LostReason::Expired));
    assert!(deleted.elapsed() < Duration::from_millis(1500));
    assert_eq!(lock.lost(), Some(LostReason::Expired));
    // A scoped exit reports the loss, not a plain release error.
    let err = lock.finish().await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::Lost {
                reason: LostReason::Expired,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(lock.lost(), None, "the holding is gone after finish");
}

#[tokio::test]
async fn finish_if_held_ends_a_holding_and_does_nothing_without_one() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let lock = client.lock("scoped").unwrap();
    // Never acquired: nothing to end, and no "not owner" error.
    lock.finish_if_held().await.unwrap();

    lock.acquire(Wait::Once).await.unwrap();
    lock.finish_if_held().await.unwrap();
    assert!(!lock.locked().await.unwrap(), "the holding was released");
    lock.finish_if_held().await.unwrap();

    // A holding lost during the scope is reported, as finish() does.
    lock.acquire(Wait::Once).await.unwrap();
    let _: () = redis.conn().del("rlock:{scoped}").unwrap();
    let err = lock.finish_if_held().await.unwrap_err();
    assert!(matches!(err, Error::Lost { .. }), "{err:?}");
}

#[tokio::test]
async fn a_key_taken_by_another_owner_is_reported_lost_with_that_reason() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let opts = LockOptions::default().ttl(Duration::from_millis(600));
    let lock = client.lock_with("stolen", opts).unwrap();
    lock.acquire(Wait::Once).await.unwrap();
    let _: () = redis
        .conn()
        .hset("rlock:{stolen}", "owner", "someone-else")
        .unwrap();
    let lost = tokio::time::timeout(Duration::from_secs(2), lock.lost_signal())
        .await
        .unwrap();
    assert_eq!(lost, Some(LostReason::HeldByAnother));
    let owner: String = redis.conn().hget("rlock:{stolen}", "owner").unwrap();
    assert_eq!(
        owner, "someone-else",
        "the other owner's lock is never touched"
    );
    let err = lock.release().await.unwrap_err();
    assert_eq!(err.category(), "not owner");
}

#[tokio::test]
async fn redis_stopped_while_held_reports_lost_by_the_lease_deadline_then_recovers() {
    let mut redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let opts = LockOptions::default().ttl(Duration::from_millis(800));
    let lock = client.lock_with("outage", opts).unwrap();
    lock.acquire(Wait::Once).await.unwrap();
    let stopped = Instant::now();
    redis.stop();
    let lost = tokio::time::timeout(Duration::from_secs(3), lock.lost_signal())
        .await
        .expect("loss not reported");
    assert_eq!(lost, Some(LostReason::Unreachable));
    // By the lease deadline (800 ms after the last renewal, so at most 800 ms
    // after the stop), plus scheduling slack.
    assert!(
        stopped.elapsed() < Duration::from_millis(1300),
        "{:?}",
        stopped.elapsed()
    );

    redis.restart();
    let fresh = client.lock("outage").unwrap();
    let mut acquired = None;
    for _ in 0..3 {
        // The first command on the dropped connection may fail once more
        // while the manager reconnects.
        match fresh.acquire(Wait::For(Duration::from_secs(2))).await {
            Ok(a) => {
                acquired = Some(a);
                break;
            }
            Err(e) => assert_eq!(e.category(), "connection", "{e:?}"),
        }
    }
    assert!(acquired.is_some(), "acquisitions work after the restart");
    fresh.release().await.unwrap();
}

/// A lock on a client that gives up on a reply after 200 ms, so a stalled
/// Redis leaves its requests unanswered.
async fn impatient_lock(redis: &RedisServer, name: &str, ttl: Duration) -> (Client, Lock) {
    let options = ClientOptions {
        response_timeout: Duration::from_millis(200),
        ..ClientOptions::default()
    };
    let client = Client::connect_with(&redis.url(), options).await.unwrap();
    let lock = client
        .lock_with(name, LockOptions::default().ttl(ttl))
        .unwrap();
    (client, lock)
}

#[tokio::test]
async fn a_release_redis_does_not_answer_stops_renewal_so_the_lease_ends_on_its_own() {
    let redis = RedisServer::start();
    let (_client, lock) = impatient_lock(&redis, "unanswered", Duration::from_secs(3)).await;
    lock.acquire(Wait::Once).await.unwrap();
    // Redis stalls past the release's retries, then comes back with the key.
    let stall = redis.stall(1.0);
    let err = lock.release().await.unwrap_err();
    assert_eq!(err.category(), "connection", "{err}");
    assert_eq!(lock.lost(), Some(LostReason::Unreachable));
    stall.join().unwrap();
    // Nothing renews it any more: it is gone by the end of its lease.
    let gone = eventually(Duration::from_secs(5), || {
        !redis
            .conn()
            .exists::<_, bool>("rlock:{unanswered}")
            .unwrap()
    })
    .await;
    assert!(gone, "the abandoned holding was still renewed");
    // The same owner takes it afresh, not as a re-entry of the lost holding.
    assert_eq!(lock.acquire(Wait::Once).await.unwrap().count, 1);
    assert_eq!(lock.release().await.unwrap(), 0);
}

#[tokio::test]
async fn the_same_owner_taking_back_a_holding_it_lost_track_of_is_not_a_reentry() {
    let redis = RedisServer::start();
    let (_client, lock) = impatient_lock(&redis, "resumed", Duration::from_secs(20)).await;
    let first = lock.acquire(Wait::Once).await.unwrap();
    let stall = redis.stall(1.0);
    lock.release().await.unwrap_err();
    stall.join().unwrap();
    // The key is still there, this owner's: taking it again holds it once.
    let again = lock.acquire(Wait::Once).await.unwrap();
    assert_eq!(again.count, 1);
    assert_eq!(again.fencing_token, first.fencing_token);
    assert_eq!(lock.lost(), None);
    assert_eq!(lock.release().await.unwrap(), 0, "one release frees it");
    assert!(!lock.locked().await.unwrap());
}

#[tokio::test]
async fn a_nested_release_refused_tells_the_outer_scope_its_lock_was_lost() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let lock = client.lock("nested-gone").unwrap();
    lock.acquire(Wait::Once).await.unwrap();
    lock.acquire(Wait::Once).await.unwrap();
    let _: () = redis.conn().del("rlock:{nested-gone}").unwrap();
    let inner = lock.release().await;
    assert!(matches!(inner, Err(Error::NotOwned { .. })), "{inner:?}");
    assert_eq!(lock.lost(), Some(LostReason::Expired));
    assert!(matches!(lock.finish().await, Err(Error::Lost { .. })));
}

#[tokio::test]
async fn a_lapsed_lease_reads_as_lost_whenever_the_renewal_loop_wakes() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let lease = Duration::from_millis(300);
    let lock = client
        .lock_with(
            "lapsed",
            LockOptions::default().ttl(lease).auto_renew(false),
        )
        .unwrap();
    let taken = Instant::now();
    lock.acquire(Wait::Once).await.unwrap();
    // Read by a thread that never yields to the runtime: the answer comes
    // from the clock, not from the loop having run.
    std::thread::sleep(lease);
    assert!(taken.elapsed() >= lease);
    assert_eq!(lock.lost(), Some(LostReason::LeaseEnded));
}

/// The outer scope's holding is lost by this client's clock while Redis
/// still holds the key for its owner (here the key's lease was lengthened
/// from outside; a renewal applied whose reply was lost does the same, see
/// `network_faults.rs`). An acquisition inside that scope is lost too: were
/// it taken as a fresh holding, its release would free the lock while the
/// outer scope runs on, and that scope would end hearing of no loss.
#[tokio::test]
async fn a_nested_acquire_inside_a_scope_lost_by_the_clock_is_lost_too() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let opts = LockOptions::default()
        .ttl(Duration::from_millis(300))
        .auto_renew(false);
    let lock = client.lock_with("outlived", opts).unwrap();
    lock.acquire(Wait::Once).await.unwrap();
    let _: () = redis.conn().pexpire("rlock:{outlived}", 30_000).unwrap();
    let lost = tokio::time::timeout(Duration::from_secs(5), lock.lost_signal())
        .await
        .expect("not reported lost");
    assert_eq!(lost, Some(LostReason::LeaseEnded));

    let nested = lock.acquire(Wait::For(Duration::from_secs(2))).await;
    assert!(
        matches!(
            nested,
            Err(Error::Lost {
                reason: LostReason::LeaseEnded,
                ..
            })
        ),
        "{nested:?}"
    );
    let holder: Option<String> = redis.conn().hget("rlock:{outlived}", "owner").unwrap();
    assert_eq!(holder.as_deref(), Some(lock.owner()), "the key was touched");
    let count: u32 = redis.conn().hget("rlock:{outlived}", "count").unwrap();
    assert_eq!(count, 1, "the lost acquisition was counted in Redis");
    let other = Client::connect(&redis.url()).await.unwrap();
    let rival = other.lock("outlived").unwrap();
    assert_eq!(rival.try_acquire().await.unwrap(), None);

    // The outer scope ends with the loss, and only then is the lock free.
    assert!(matches!(lock.finish().await, Err(Error::Lost { .. })));
    assert!(rival.try_acquire().await.unwrap().is_some());
    rival.release().await.unwrap();
    // With its scope ended, the owner takes the lock afresh.
    assert_eq!(lock.acquire(Wait::Once).await.unwrap().count, 1);
    assert_eq!(lock.lost(), None);
    assert_eq!(lock.release().await.unwrap(), 0);
}

/// A re-entry sent while the holding is still held by this client's clock,
/// but whose key is gone in Redis: the script takes the lock afresh (a new
/// token), which is no re-entry. The grant is given back, and the holding
/// and the acquisition are lost.
#[tokio::test]
async fn a_re_entry_that_finds_its_key_gone_is_lost_and_keeps_nothing() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let lock = client
        .lock_with(
            "vanished",
            LockOptions::default().ttl(Duration::from_secs(30)),
        )
        .unwrap();
    lock.acquire(Wait::Once).await.unwrap();
    let _: () = redis.conn().del("rlock:{vanished}").unwrap();
    let nested = lock.acquire(Wait::Once).await;
    assert!(
        matches!(
            nested,
            Err(Error::Lost {
                reason: LostReason::Expired,
                ..
            })
        ),
        "{nested:?}"
    );
    let exists: bool = redis.conn().exists("rlock:{vanished}").unwrap();
    assert!(!exists, "the fresh grant was kept");
    assert_eq!(lock.lost(), Some(LostReason::Expired));
    assert!(matches!(lock.finish().await, Err(Error::Lost { .. })));
    assert_eq!(lock.acquire(Wait::Once).await.unwrap().count, 1);
    lock.release().await.unwrap();
}

/// A re-entry that finds another owner holding the key: the holding is lost
/// at once, and the acquisition neither waits nor stands in line.
#[tokio::test]
async fn a_re_entry_that_finds_another_holder_is_lost_without_waiting() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let lock = client
        .lock_with(
            "taken-over",
            LockOptions::default().ttl(Duration::from_secs(30)),
        )
        .unwrap();
    lock.acquire(Wait::Once).await.unwrap();
    let _: () = redis.conn().del("rlock:{taken-over}").unwrap();
    let other = Client::connect(&redis.url()).await.unwrap();
    let rival = other.lock("taken-over").unwrap();
    rival.acquire(Wait::Once).await.unwrap();

    let nested = tokio::time::timeout(
        Duration::from_secs(10),
        lock.acquire(Wait::For(Duration::from_secs(30))),
    )
    .await
    .expect("the re-entry waited for the other holder");
    assert!(
        matches!(
            nested,
            Err(Error::Lost {
                reason: LostReason::HeldByAnother,
                ..
            })
        ),
        "{nested:?}"
    );
    let line: usize = redis.conn().llen("rlock:{taken-over}:queue").unwrap();
    assert_eq!(line, 0, "the re-entry stood in line");
    assert!(rival.owned().await.unwrap(), "the rival lost its holding");
    assert!(matches!(lock.finish().await, Err(Error::Lost { .. })));
    assert_eq!(
        rival.release().await.unwrap(),
        0,
        "the rival's holding was touched"
    );
}
