//! Network faults between a client and Redis for read-write locks and
//! semaphores, made deterministic by a fault proxy: every script of
//! `core/lua/many/` applied by Redis with its reply lost, and sent again by the
//! core; a waiter whose leaving the line failed; a handoff heard late. Each
//! test states the promise that fault must not break: never more permits
//! held than the semaphore has, never a writer with anyone else inside,
//! never a share counted twice or a waiter stranded.

use std::time::{Duration, Instant};

use rlock_core::{Client, Error, LockOptions, Wait};
use rlock_test_support::{behind_proxy, eventually, finished, in_line, script, Cut};

fn options() -> LockOptions {
    LockOptions::default().ttl(Duration::from_secs(20))
}

/// One cycle of `sem`, so that the server knows every script by its SHA
/// (a cut on the SHA would otherwise meet NOSCRIPT, not the script).
async fn warm_up(client: &Client, name: &str) {
    let sem = client.semaphore(name, 2, options()).unwrap();
    sem.acquire(1, Wait::Once).await.unwrap();
    sem.lock().extend(None).await.unwrap();
    sem.release().await.unwrap();
    let rw = client.rw_lock(name, options()).unwrap();
    rw.write().acquire(Wait::Once).await.unwrap();
    rw.write().release().await.unwrap();
}

#[tokio::test]
async fn an_acquisition_whose_reply_was_lost_takes_its_permits_once() {
    let (server, proxy, client) = behind_proxy().await;
    warm_up(&client, "jobs").await;
    let sem = client.semaphore("jobs", 3, options()).unwrap();
    proxy.cut_on(&script(&server, "many acquire"), Cut::AfterForward, 1);
    let got = sem.acquire(2, Wait::Once).await.unwrap();
    assert_eq!(proxy.cuts_done(), 1);
    assert_eq!(got.count, 1, "the resend counted as a re-entry");
    assert_eq!(sem.held().await.unwrap(), 2);
    let rival = Client::connect(&server.url()).await.unwrap();
    let other = rival.semaphore("jobs", 3, options()).unwrap();
    assert!(other
        .permits(2)
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .is_none());
    assert_eq!(sem.release().await.unwrap(), 0);
    assert_eq!(sem.available().await.unwrap(), 3);
}

#[tokio::test]
async fn a_last_release_that_served_the_line_and_lost_its_reply_reports_success() {
    let (server, proxy, client) = behind_proxy().await;
    warm_up(&client, "one").await;
    let holder = client.semaphore("one", 1, options()).unwrap();
    holder.acquire(1, Wait::Once).await.unwrap();
    let rival = Client::connect(&server.url()).await.unwrap();
    let waiter = rival.semaphore("one", 1, options()).unwrap();
    let waiting = {
        let waiter = waiter.clone();
        tokio::spawn(async move { waiter.acquire(1, Wait::For(Duration::from_secs(10))).await })
    };
    assert!(in_line(&server, "rlock:{one}:semaphore", 1).await);
    proxy.cut_on(&script(&server, "many release"), Cut::AfterForward, 1);
    assert_eq!(holder.release().await.unwrap(), 0);
    assert_eq!(proxy.cuts_done(), 1);
    finished(waiting, Duration::from_secs(5)).await.unwrap();
    let state = waiter.state().await.unwrap();
    assert_eq!(state.used(), 1, "{state:?}");
    assert_eq!(state.holders[0].owner, waiter.lock().owner());
    waiter.release().await.unwrap();
}

#[tokio::test]
async fn an_extension_whose_reply_was_lost_keeps_the_holding_and_no_more() {
    let (server, proxy, client) = behind_proxy().await;
    warm_up(&client, "ext").await;
    let rw = client.rw_lock("ext", options()).unwrap();
    rw.read().acquire(Wait::Once).await.unwrap();
    proxy.cut_on(&script(&server, "many extend"), Cut::AfterForward, 1);
    rw.read()
        .extend(Some(Duration::from_secs(5)))
        .await
        .unwrap();
    assert_eq!(proxy.cuts_done(), 1);
    let state = rw.state().await.unwrap();
    assert_eq!(state.holders.len(), 1);
    assert!(state.holders[0].ttl_ms <= 5_000, "{state:?}");
    assert_eq!(rw.read().release().await.unwrap(), 0);
}

#[tokio::test]
async fn a_waiter_whose_leaving_lost_its_reply_leaves_no_entry_and_strands_no_one() {
    let (server, proxy, client) = behind_proxy().await;
    warm_up(&client, "gate").await;
    let holding = Client::connect(&server.url()).await.unwrap();
    let holder = holding.semaphore("gate", 1, options()).unwrap();
    holder.acquire(1, Wait::Once).await.unwrap();
    let leaving = client.semaphore("gate", 1, options()).unwrap();
    proxy.cut_on(&script(&server, "many dequeue"), Cut::AfterForward, 1);
    let e = leaving
        .acquire(1, Wait::For(Duration::from_millis(300)))
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Timeout { .. }), "{e}");
    assert!(eventually(Duration::from_secs(5), || proxy.cuts_done() == 1).await);
    assert!(in_line(&server, "rlock:{gate}:semaphore", 0).await);
    let next = holding.semaphore("gate", 1, options()).unwrap();
    let waiting = {
        let next = next.clone();
        tokio::spawn(async move { next.acquire(1, Wait::For(Duration::from_secs(10))).await })
    };
    assert!(in_line(&server, "rlock:{gate}:semaphore", 1).await);
    let released = Instant::now();
    holder.release().await.unwrap();
    finished(waiting, Duration::from_secs(5)).await.unwrap();
    assert!(released.elapsed() < Duration::from_secs(4));
    next.release().await.unwrap();
}

#[tokio::test]
async fn a_share_handed_to_a_waiter_whose_leaving_failed_is_passed_on() {
    let (server, proxy, leaving) = behind_proxy().await;
    warm_up(&leaving, "report").await;
    let holding = Client::connect(&server.url()).await.unwrap();
    let writer = holding.rw_lock("report", options()).unwrap();
    writer.write().acquire(Wait::Once).await.unwrap();
    // A reader with a long lease times out first in line, and every try to
    // take its entry out is cut before Redis sees it.
    let gone = leaving.rw_lock("report", options()).unwrap();
    let timing_out = {
        let gone = gone.clone();
        tokio::spawn(async move {
            gone.read()
                .acquire(Wait::For(Duration::from_millis(1500)))
                .await
        })
    };
    assert!(in_line(&server, "rlock:{report}:rwlock", 1).await);
    // A writer of the same client stays, so the client keeps its waiter
    // channel (and the entry left behind counts as alive).
    let stays = leaving.rw_lock("report", options()).unwrap();
    let staying = {
        let stays = stays.clone();
        tokio::spawn(async move {
            stays
                .write()
                .acquire(Wait::For(Duration::from_secs(20)))
                .await
        })
    };
    assert!(in_line(&server, "rlock:{report}:rwlock", 2).await);
    proxy.cut_on(&script(&server, "many dequeue"), Cut::BeforeForward, 100);
    let timed_out = finished(timing_out, Duration::from_secs(5)).await;
    assert!(
        matches!(timed_out, Err(Error::Timeout { .. })),
        "{timed_out:?}"
    );
    assert!(proxy.cuts_done() > 0);
    let released = Instant::now();
    writer.write().release().await.unwrap();
    // The read share handed to the departed reader is given back, and the
    // writer behind it gets in, not after the 20 s lease.
    finished(staying, Duration::from_secs(5)).await.unwrap();
    assert!(released.elapsed() < Duration::from_secs(4));
    let state = stays.state().await.unwrap();
    assert_eq!(state.holders.len(), 1, "{state:?}");
    assert!(state.holders[0].writes());
    stays.write().release().await.unwrap();
}

/// How late a test may observe an event it awaits on a loaded machine.
const SCHEDULING_SLACK: Duration = Duration::from_millis(100);

#[tokio::test]
async fn a_handoff_heard_late_is_never_believed_past_redis_expiry() {
    let (server, proxy, client) = behind_proxy().await;
    warm_up(&client, "late").await;
    let holding = Client::connect(&server.url()).await.unwrap();
    let holder = holding.semaphore("late", 1, options()).unwrap();
    holder.acquire(1, Wait::Once).await.unwrap();
    // The waiter's pub/sub wire delivers 700 ms late; its lease is 1 s and
    // not renewed.
    let lease = Duration::from_secs(1);
    let waiter = client
        .semaphore(
            "late",
            1,
            LockOptions::default().ttl(lease).auto_renew(false),
        )
        .unwrap();
    let waiting = {
        let waiter = waiter.clone();
        tokio::spawn(async move { waiter.acquire(1, Wait::For(Duration::from_secs(10))).await })
    };
    assert!(in_line(&server, "rlock:{late}:semaphore", 1).await);
    // The handoff is written now, and heard 700 ms later.
    tokio::time::sleep(Duration::from_millis(600)).await;
    proxy.delay_pubsub(Duration::from_millis(700));
    holder.release().await.unwrap();
    finished(waiting, Duration::from_secs(5)).await.unwrap();
    // When Redis lets the share go: no earlier than the lease it reports,
    // counted from before it was asked.
    let asked = Instant::now();
    let state = waiter.state().await.unwrap();
    let mine = state
        .holders
        .iter()
        .find(|h| h.owner == waiter.lock().owner())
        .expect("the waiter holds its permit in Redis");
    let redis_expiry = asked + Duration::from_millis(mine.ttl_ms);
    let lost = waiter.lock().lost_signal().await;
    let told = Instant::now();
    assert!(lost.is_some());
    assert!(
        told <= redis_expiry + SCHEDULING_SLACK,
        "believed held {:?} past Redis' expiry",
        told - redis_expiry
    );
}
