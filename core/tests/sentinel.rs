//! Sentinel: the master is found through Sentinel and found again after a
//! failover; `sync_replicas` makes an acquisition wait for replicas.

use std::time::{Duration, Instant};

use redis::Commands;
use rlock_core::{Client, LockOptions, Wait};
use rlock_test_support::{wait_until, SentinelGroup};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_follow_the_master_through_a_sentinel_failover() {
    let mut group = SentinelGroup::start();
    let client = Client::connect(&group.url()).await.unwrap();
    let lock = client.lock("failover").unwrap();
    lock.acquire(Wait::Once).await.unwrap();
    let old = group.master_port();
    assert_eq!(old, group.primary.port);
    assert!(group
        .primary
        .conn()
        .exists::<_, bool>("rlock:{failover}")
        .unwrap());

    group.primary.stop();
    wait_until(
        Duration::from_secs(30),
        "Sentinel promotes the replica",
        || group.master_port() == group.replica.port,
    );
    // Acquisitions work on the new master (retrying while the client notices).
    let fresh = client.lock("after").unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        match fresh.acquire(Wait::For(Duration::from_secs(2))).await {
            Ok(_) => break,
            Err(e) if e.category() == "connection" && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert!(
        group
            .replica
            .conn()
            .exists::<_, bool>("rlock:{after}")
            .unwrap(),
        "taken on the new master"
    );
    fresh.release().await.unwrap();
}

#[tokio::test]
async fn sync_replicas_acquires_only_what_a_replica_acknowledged() {
    let mut group = SentinelGroup::start();
    let client = Client::connect(&group.url()).await.unwrap();
    let synced = LockOptions::default().sync_replicas(Some(1));
    let lock = client.lock_with("replicated", synced.clone()).unwrap();
    let held = lock.acquire(Wait::Once).await.unwrap();
    wait_until(Duration::from_secs(5), "the replica has the lock", || {
        group
            .replica
            .conn()
            .exists::<_, bool>("rlock:{replicated}")
            .unwrap()
    });
    lock.extend(None).await.unwrap();
    lock.release().await.unwrap();

    // No replica: the acquisition is undone and reported, fence and count
    // untouched for the holder that did not get it.
    group.replica.stop();
    let lonely = client.lock_with("unreplicated", synced).unwrap();
    let err = lonely.acquire(Wait::Once).await.unwrap_err();
    assert_eq!(err.category(), "timeout", "{err}");
    assert!(err.to_string().contains("replicas"), "{err}");
    assert!(!group
        .primary
        .conn()
        .exists::<_, bool>("rlock:{unreplicated}")
        .unwrap());
    assert_eq!(lonely.fencing_token(), None);
    assert_eq!(lonely.count(), 0);
    assert!(held.fencing_token >= 1);
}

/// A re-entry too few replicas acknowledged is undone like any other
/// acquisition: the outer holding goes on, not lost (nobody else holds it).
#[tokio::test]
async fn a_re_entry_too_few_replicas_acknowledged_loses_nothing() {
    let mut group = SentinelGroup::start();
    let client = Client::connect(&group.url()).await.unwrap();
    let synced = LockOptions::default()
        .ttl(Duration::from_secs(10))
        .sync_replicas(Some(1));
    let lock = client.lock_with("re-replicated", synced).unwrap();
    lock.acquire(Wait::Once).await.unwrap();
    group.replica.stop();
    let nested = lock.acquire(Wait::Once).await;
    assert!(
        matches!(nested, Err(rlock_core::Error::Timeout { .. })),
        "{nested:?}"
    );
    let owner: Option<String> = group
        .primary
        .conn()
        .hget("rlock:{re-replicated}", "owner")
        .unwrap();
    assert_eq!(owner.as_deref(), Some(lock.owner()), "still held in Redis");
    assert_eq!(lock.lost(), None, "the outer holding was marked lost");
    assert_eq!(lock.count(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_replicas_holds_read_write_locks_and_permits_only_when_a_replica_has_them() {
    let mut group = SentinelGroup::start();
    let client = Client::connect(&group.url()).await.unwrap();
    let synced = LockOptions::default().sync_replicas(Some(1));
    let rw = client.rw_lock("replicated-rw", synced.clone()).unwrap();
    rw.write().acquire(Wait::Once).await.unwrap();
    rw.read().acquire(Wait::Once).await.unwrap();
    let sem = client
        .semaphore("replicated-sem", 2, synced.clone())
        .unwrap();
    sem.acquire(1, Wait::Once).await.unwrap();
    wait_until(Duration::from_secs(5), "the replica has them", || {
        let mut replica = group.replica.conn();
        replica
            .exists::<_, bool>("rlock:{replicated-rw}:rwlock")
            .unwrap()
            && replica
                .exists::<_, bool>("rlock:{replicated-sem}:semaphore")
                .unwrap()
    });
    rw.read().release().await.unwrap();
    rw.write().release().await.unwrap();
    sem.release().await.unwrap();

    group.replica.stop();
    let lonely = client.semaphore("unreplicated", 2, synced).unwrap();
    let err = lonely.acquire(1, Wait::Once).await.unwrap_err();
    assert_eq!(err.category(), "timeout", "{err}");
    assert!(err.to_string().contains("replicas"), "{err}");
    assert_eq!(
        lonely.held().await.unwrap(),
        0,
        "the undone permit is given back"
    );
}
