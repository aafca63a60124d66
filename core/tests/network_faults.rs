//! Network faults between a client and Redis, each made deterministic by a
//! fault proxy (`FaultProxy`): a request Redis applied whose reply was
//! lost and that the core sends again, a pub/sub wire that delivers late, a
//! waiter whose leaving the line failed, masters that answer too late, and
//! keys of the wrong type. Each test states the promise that fault must not
//! break.

use std::time::{Duration, Instant};

use redis::Commands;
use rlock_core::{Client, ClientOptions, Error, JobOptions, LockOptions, Wait};
use rlock_test_support::{
    behind_proxy, eventually, finished, in_line, script, Cut, FaultProxy, Masters, RedisServer,
};

fn count(server: &RedisServer, name: &str) -> Option<u32> {
    server
        .conn()
        .hget(format!("rlock:{{{name}}}"), "count")
        .unwrap()
}

#[tokio::test]
async fn a_last_release_that_handed_the_lock_over_and_lost_its_reply_reports_success() {
    let (server, proxy, client) = behind_proxy().await;
    let holder = client
        .lock_with("job", LockOptions::default().fair(true))
        .unwrap();
    holder.acquire(Wait::Once).await.unwrap();
    let rival = Client::connect(&server.url()).await.unwrap();
    let waiter = rival
        .lock_with("job", LockOptions::default().fair(true))
        .unwrap();
    let waiting = tokio::spawn(async move {
        let held = waiter.acquire(Wait::For(Duration::from_secs(10))).await;
        (held, waiter)
    });
    assert!(
        in_line(&server, "rlock:{job}", 1).await,
        "the waiter never stood in line"
    );
    proxy.cut_on(&script(&server, "mutex release"), Cut::AfterForward, 1);
    // Handed over to the waiter, the reply lost; the resend finds the waiter
    // holding it, while the holder's lease still ran.
    holder.finish().await.unwrap();
    assert_eq!(proxy.cuts_done(), 1);
    let (held, waiter) = finished(waiting, Duration::from_secs(5)).await;
    held.unwrap();
    assert!(waiter.owned().await.unwrap());
}

#[tokio::test]
async fn a_handoff_heard_late_is_never_believed_past_redis_expiry() {
    let (server, proxy, waiting) = behind_proxy().await;
    let holding = Client::connect(&server.url()).await.unwrap();
    let holder = holding
        .lock_with("cache", LockOptions::default().fair(true))
        .unwrap();
    holder.acquire(Wait::Once).await.unwrap();
    // The waiter's pub/sub wire delivers 700 ms late; its lease is 1 s and
    // not renewed.
    let lease = Duration::from_secs(1);
    let waiter = waiting
        .lock_with(
            "cache",
            LockOptions::default()
                .fair(true)
                .ttl(lease)
                .auto_renew(false),
        )
        .unwrap();
    let task = {
        let waiter = waiter.clone();
        tokio::spawn(async move { waiter.acquire(Wait::For(Duration::from_secs(10))).await })
    };
    assert!(
        in_line(&server, "rlock:{cache}", 1).await,
        "the waiter never stood in line"
    );
    // The handoff is written now, and heard 700 ms later.
    tokio::time::sleep(Duration::from_millis(600)).await;
    proxy.delay_pubsub(Duration::from_millis(700));
    holder.release().await.unwrap();
    finished(task, Duration::from_secs(5)).await.unwrap();
    // When Redis lets the lock go: no earlier than the lease it reports,
    // counted from before it was asked.
    let asked = Instant::now();
    let pttl: u64 = server.conn().pttl("rlock:{cache}").unwrap();
    let redis_expiry = asked + Duration::from_millis(pttl);
    let lost = waiter.lost_signal().await;
    let told = Instant::now();
    assert!(lost.is_some());
    // Told by then (the slack covers this test's own scheduling; a lease
    // timed from the late message would overrun it by the 700 ms delay).
    assert!(
        told <= redis_expiry + SCHEDULING_SLACK,
        "believed held {:?} past Redis' expiry",
        told - redis_expiry
    );
}

/// How late a test may observe an event it awaits on a loaded machine.
const SCHEDULING_SLACK: Duration = Duration::from_millis(100);

#[tokio::test]
async fn a_handoff_to_a_waiter_whose_leaving_failed_is_passed_on() {
    let (server, proxy, leaving) = behind_proxy().await;
    let holding = Client::connect(&server.url()).await.unwrap();
    let holder = holding
        .lock_with("report", LockOptions::default().fair(true))
        .unwrap();
    holder.acquire(Wait::Once).await.unwrap();
    // A waiter with an 8 s lease times out in line, first in it, and every
    // try to take its entry out is cut before Redis sees it.
    let gone = leaving
        .lock_with(
            "report",
            LockOptions::default()
                .fair(true)
                .ttl(Duration::from_secs(8)),
        )
        .unwrap();
    let timing_out = {
        let gone = gone.clone();
        tokio::spawn(async move { gone.acquire(Wait::For(Duration::from_millis(1500))).await })
    };
    assert!(in_line(&server, "rlock:{report}", 1).await);
    // Another waiter of the same client stays, so the client keeps its
    // waiter channel (and the entry left behind counts as alive).
    let stays = leaving
        .lock_with("report", LockOptions::default().fair(true))
        .unwrap();
    let staying =
        tokio::spawn(async move { stays.acquire(Wait::For(Duration::from_secs(20))).await });
    assert!(in_line(&server, "rlock:{report}", 2).await);
    proxy.cut_on(&script(&server, "mutex dequeue"), Cut::BeforeForward, 100);
    let timed_out = finished(timing_out, Duration::from_secs(5)).await;
    assert!(
        matches!(timed_out, Err(Error::Timeout { .. })),
        "{timed_out:?}"
    );
    assert!(proxy.cuts_done() > 0);
    let line: Vec<String> = server.conn().lrange("rlock:{report}:queue", 0, -1).unwrap();
    assert_eq!(line.first().map(String::as_str), Some(gone.owner()));
    let released = Instant::now();
    holder.release().await.unwrap();
    // The grant to the departed waiter reaches the one that stayed, not
    // after the 8 s lease.
    let held = finished(staying, Duration::from_secs(5)).await;
    held.unwrap();
    assert!(released.elapsed() < Duration::from_secs(4));
}

#[tokio::test]
async fn grants_of_masters_that_answered_too_late_are_given_back() {
    let servers = Masters::start(3);
    let proxies: Vec<FaultProxy> = servers.iter().map(|s| FaultProxy::start(s.port)).collect();
    let urls: Vec<String> = proxies.iter().map(FaultProxy::url).collect();
    let options = ClientOptions::default().node_timeout(Duration::from_millis(100));
    let slow = Client::connect_urls(&urls, options).await.unwrap();
    let lock = slow
        .lock_with("batch", LockOptions::default().ttl(Duration::from_secs(8)))
        .unwrap();
    for p in &proxies {
        p.delay_replies(Duration::from_millis(300));
    }
    let attempt = lock.acquire(Wait::Once).await;
    assert!(matches!(attempt, Err(Error::Timeout { .. })), "{attempt:?}");
    for p in &proxies {
        p.delay_replies(Duration::ZERO);
    }
    // Every master granted it, late; the give-back reaches them all.
    let other = Client::connect_urls(&servers.urls(), ClientOptions::default())
        .await
        .unwrap();
    let start = Instant::now();
    other
        .lock("batch")
        .unwrap()
        .acquire(Wait::For(Duration::from_secs(8)))
        .await
        .unwrap();
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "waited {:?} for grants nobody held",
        start.elapsed()
    );
}

#[tokio::test]
async fn keys_of_another_type_in_the_line_never_fail_as_connection_errors() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let mut c = server.conn();
    let _: () = c.set("rlock:{odd}:queue", "x").unwrap();
    let _: () = c.set("rlock:{odd}:leases", "x").unwrap();
    let lock = client
        .lock_with("odd", LockOptions::default().fair(true))
        .unwrap();
    lock.acquire(Wait::Once).await.unwrap();
    let rival = client
        .lock_with("odd", LockOptions::default().fair(true))
        .unwrap();
    let busy = rival.acquire(Wait::For(Duration::from_millis(100))).await;
    assert!(matches!(busy, Err(Error::Timeout { .. })), "{busy:?}");
    assert_eq!(lock.release().await.unwrap(), 0);
    assert!(rival.try_acquire().await.unwrap().is_some());
    // Nothing of the line was written over.
    assert_eq!(c.get::<_, String>("rlock:{odd}:queue").unwrap(), "x");
}

#[tokio::test]
async fn a_fence_counter_of_another_type_counts_as_busy_and_names_the_key() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let mut c = server.conn();
    let lock = client.lock("odd").unwrap();
    let _: () = c.hset(&lock.keys().fence, "a", "b").unwrap();
    match lock.acquire(Wait::For(Duration::from_millis(100))).await {
        Err(Error::Timeout {
            cause: Some(cause), ..
        }) => {
            assert!(cause.contains(&lock.keys().fence), "{cause}")
        }
        other => panic!("{other:?}"),
    }
    assert!(
        !c.exists::<_, bool>("rlock:{odd}").unwrap(),
        "half-written lock"
    );
}

#[tokio::test]
async fn concurrent_acquisitions_of_one_owner_are_each_counted() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let lock = client.lock("shared-handle").unwrap();
    let both = futures_join(lock.acquire(Wait::Once), lock.acquire(Wait::Once)).await;
    assert!(both.0.is_ok() && both.1.is_ok(), "{both:?}");
    assert_eq!(count(&server, "shared-handle"), Some(2));
    assert_eq!(lock.release().await.unwrap(), 1);
    assert_eq!(lock.release().await.unwrap(), 0);
}

async fn futures_join<A: std::future::Future, B: std::future::Future>(
    a: A,
    b: B,
) -> (A::Output, B::Output) {
    tokio::join!(a, b)
}

#[tokio::test]
async fn two_waits_of_one_owner_hold_the_lock_once_each_in_turn() {
    let server = RedisServer::start();
    let holding = Client::connect(&server.url()).await.unwrap();
    let holder = holding
        .lock_with("twice", LockOptions::default().fair(true))
        .unwrap();
    holder.acquire(Wait::Once).await.unwrap();
    let client = Client::connect(&server.url()).await.unwrap();
    let lock = client
        .lock_with("twice", LockOptions::default().fair(true))
        .unwrap();
    let waits: Vec<_> = (0..2)
        .map(|_| {
            let lock = lock.clone();
            tokio::spawn(async move { lock.acquire(Wait::For(Duration::from_secs(10))).await })
        })
        .collect();
    assert!(in_line(&server, "rlock:{twice}", 1).await);
    holder.release().await.unwrap();
    let mut counts = Vec::new();
    for w in waits {
        counts.push(finished(w, Duration::from_secs(5)).await.unwrap().count);
    }
    counts.sort_unstable();
    assert_eq!(counts, [1, 2], "both waits came back as the first holding");
    assert_eq!(count(&server, "twice"), Some(2));
    assert_eq!(lock.release().await.unwrap(), 1);
    assert_eq!(lock.release().await.unwrap(), 0);
    assert!(holder.try_acquire().await.unwrap().is_some());
}

#[tokio::test]
async fn a_re_entry_whose_every_reply_was_lost_does_not_keep_the_lock_after_the_last_release() {
    let (server, proxy, client) = behind_proxy().await;
    let lock = client.lock("reentry").unwrap();
    lock.acquire(Wait::Once).await.unwrap();
    let acquire = script(&server, "mutex acquire");
    proxy.cut_on(&acquire, Cut::AfterForward, 2);
    let unknown = lock.acquire(Wait::Once).await;
    assert!(matches!(unknown, Err(Error::Connection(_))), "{unknown:?}");
    assert_eq!(proxy.cuts_done(), 2);
    assert_eq!(
        count(&server, "reentry"),
        Some(2),
        "the re-entry never landed"
    );
    // The owner released what it knows it holds: the lock is free.
    assert_eq!(lock.release().await.unwrap(), 0);
    let rival = Client::connect(&server.url()).await.unwrap();
    assert!(rival
        .lock("reentry")
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .is_some());
}

#[tokio::test]
async fn a_nested_release_that_never_reached_redis_leaves_the_outer_release_to_free_the_lock() {
    let (server, proxy, client) = behind_proxy().await;
    let lock = client.lock("inner-lost").unwrap();
    lock.acquire(Wait::Once).await.unwrap();
    lock.acquire(Wait::Once).await.unwrap();
    proxy.cut_on(&script(&server, "mutex release"), Cut::BeforeForward, 2);
    // Counted as released, though Redis never saw it: a retry of it by the
    // caller must not free the lock under the outer scope.
    assert_eq!(lock.release().await.unwrap(), 1);
    assert_eq!(count(&server, "inner-lost"), Some(2));
    // Still held, and still this owner's: the outer scope goes on.
    assert_eq!(lock.lost(), None);
    let rival = Client::connect(&server.url()).await.unwrap();
    let other = rival.lock("inner-lost").unwrap();
    assert_eq!(other.try_acquire().await.unwrap(), None);
    assert_eq!(lock.release().await.unwrap(), 0);
    let taken = other
        .try_acquire()
        .await
        .unwrap()
        .expect("the lock stayed held");
    assert!(taken.fencing_token > 1);
}

#[tokio::test]
async fn an_acquisition_answered_after_its_lease_is_never_reported_held() {
    let (_server, proxy, client) = behind_proxy().await;
    let lock = client
        .lock_with(
            "late",
            LockOptions::default()
                .ttl(Duration::from_millis(200))
                .auto_renew(false),
        )
        .unwrap();
    // Every reply comes 300 ms late: Redis grants a 200 ms lease that has
    // ended by the time the client hears of it.
    proxy.delay_replies(Duration::from_millis(300));
    match lock.acquire(Wait::For(Duration::from_millis(1500))).await {
        Err(Error::Timeout {
            cause: Some(cause), ..
        }) => {
            assert!(cause.contains("after its lease"), "{cause}")
        }
        other => panic!("held a lease that had ended: {other:?}"),
    }
    assert_eq!(lock.count(), 0);
}

/// Renewals Redis applies whose replies are lost: by this client's clock the
/// lease ends and the holding is lost, while Redis holds the key for its
/// owner a while yet. An acquisition inside the lost scope is lost too, and
/// leaves the key as it was: the lock is freed when the outer scope ends,
/// not under it (a fresh holding would have merged the two scopes, and the
/// inner release freed the lock while the outer one ran on, told nothing).
#[tokio::test]
async fn a_nested_acquire_after_renewal_replies_were_lost_is_lost_and_frees_nothing() {
    let (server, proxy, client) = behind_proxy().await;
    let lock = client
        .lock_with(
            "renewed-unheard",
            LockOptions::default().ttl(Duration::from_secs(3)),
        )
        .unwrap();
    lock.acquire(Wait::Once).await.unwrap();
    let extend = script(&server, "mutex extend");
    proxy.cut_on(&extend, Cut::AfterForward, 1_000);
    let lost = tokio::time::timeout(Duration::from_secs(10), lock.lost_signal())
        .await
        .expect("not reported lost");
    assert_eq!(lost, Some(rlock_core::LostReason::Unreachable));
    assert!(proxy.cuts_done() > 0);
    let holder: Option<String> = server
        .conn()
        .hget("rlock:{renewed-unheard}", "owner")
        .unwrap();
    assert_eq!(
        holder.as_deref(),
        Some(lock.owner()),
        "the renewals Redis applied kept the key"
    );

    let nested = lock.acquire(Wait::Once).await;
    assert!(matches!(nested, Err(Error::Lost { .. })), "{nested:?}");
    assert_eq!(count(&server, "renewed-unheard"), Some(1));
    let rival = Client::connect(&server.url()).await.unwrap();
    let other = rival.lock("renewed-unheard").unwrap();
    assert_eq!(other.try_acquire().await.unwrap(), None);
    assert!(matches!(lock.finish().await, Err(Error::Lost { .. })));
    assert!(other.try_acquire().await.unwrap().is_some());
}

/// A re-entry applied whose replies were both lost leaves Redis' count a step
/// ahead of the holder's; the holding is then lost by the clock while Redis
/// still has the key. Its release ends the holder's one scope as the holder
/// counts it (frees the key), and the owner is never shut out of its lock.
#[tokio::test]
async fn a_lost_holding_whose_redis_count_ran_ahead_is_released_whole() {
    let (server, proxy, client) = behind_proxy().await;
    let lock = client
        .lock_with(
            "ran-ahead",
            LockOptions::default()
                .ttl(Duration::from_millis(300))
                .auto_renew(false),
        )
        .unwrap();
    lock.acquire(Wait::Once).await.unwrap();
    let acquire = script(&server, "mutex acquire");
    proxy.cut_on(&acquire, Cut::AfterForward, 2);
    let unknown = lock.acquire(Wait::Once).await;
    assert!(matches!(unknown, Err(Error::Connection(_))), "{unknown:?}");
    assert_eq!(count(&server, "ran-ahead"), Some(2));
    let _: () = server.conn().pexpire("rlock:{ran-ahead}", 30_000).unwrap();
    let lost = tokio::time::timeout(Duration::from_secs(5), lock.lost_signal()).await;
    assert!(lost.is_ok(), "never reported lost");
    assert_eq!(lock.release().await.unwrap(), 0, "the one scope ended");
    assert_eq!(count(&server, "ran-ahead"), None, "the key was kept");
    let again = lock
        .acquire(Wait::Once)
        .await
        .expect("shut out of a free lock");
    assert_eq!(again.count, 1);
    lock.release().await.unwrap();
}

/// A re-entry that finds its key gone takes the lock afresh, and gives that
/// grant back; the give-back applied and its reply lost is sent again and
/// recognised: the lock ends free, nothing else touched.
#[tokio::test]
async fn a_give_back_whose_reply_was_lost_still_leaves_the_lock_free() {
    let (server, proxy, client) = behind_proxy().await;
    let lock = client
        .lock_with(
            "given-back",
            LockOptions::default().ttl(Duration::from_secs(30)),
        )
        .unwrap();
    lock.acquire(Wait::Once).await.unwrap();
    let _: () = server.conn().del("rlock:{given-back}").unwrap();
    proxy.cut_on(&script(&server, "mutex release"), Cut::AfterForward, 1);
    let nested = lock.acquire(Wait::Once).await;
    assert!(matches!(nested, Err(Error::Lost { .. })), "{nested:?}");
    assert_eq!(proxy.cuts_done(), 1, "the give-back's reply was not cut");
    let free = eventually(Duration::from_secs(5), || {
        count(&server, "given-back").is_none()
    })
    .await;
    assert!(free, "the fresh grant was kept");
    let rival = Client::connect(&server.url()).await.unwrap();
    let other = rival.lock("given-back").unwrap();
    assert!(other.try_acquire().await.unwrap().is_some());
    assert!(matches!(lock.finish().await, Err(Error::Lost { .. })));
    assert!(
        other.owned().await.unwrap(),
        "the outer scope's end touched the new holder"
    );
}

#[tokio::test]
async fn a_last_release_that_never_reached_redis_leaves_the_lock_to_its_lease_and_its_owner_goes_on_with_it(
) {
    let (server, proxy, client) = behind_proxy().await;
    let lock = client
        .lock_with(
            "unreleased",
            LockOptions::default().ttl(Duration::from_secs(30)),
        )
        .unwrap();
    let first = lock.acquire(Wait::Once).await.unwrap();
    proxy.cut_on(&script(&server, "mutex release"), Cut::BeforeForward, 2);
    let released = lock.release().await;
    assert!(
        matches!(released, Err(Error::Connection(_))),
        "{released:?}"
    );
    assert_eq!(proxy.cuts_done(), 2, "the release got through");
    // Still held in Redis, this owner's, and no longer renewed: nobody else
    // gets in before its lease ends.
    assert_eq!(count(&server, "unreleased"), Some(1));
    let rival = Client::connect(&server.url()).await.unwrap();
    let other = rival.lock("unreleased").unwrap();
    assert_eq!(other.try_acquire().await.unwrap(), None, "two holders");
    // Its owner's next acquisition finds it still its own: the same holding
    // (the same token), counted once, freed by one release.
    let again = lock.acquire(Wait::Once).await.unwrap();
    assert_eq!(again.fencing_token, first.fencing_token);
    assert_eq!(again.count, 1);
    assert_eq!(count(&server, "unreleased"), Some(1));
    assert_eq!(lock.lost(), None);
    assert_eq!(lock.release().await.unwrap(), 0);
    assert_eq!(count(&server, "unreleased"), None);
    let taken = other
        .try_acquire()
        .await
        .unwrap()
        .expect("the lock stayed held");
    assert!(taken.fencing_token > first.fencing_token);
}

/// Whether the lock `name` is gone from Redis within 20 s: well before a
/// lease of a minute or more could end it.
async fn freed_early(server: &RedisServer, name: &str) -> bool {
    eventually(Duration::from_secs(20), || count(server, name).is_none()).await
}

#[tokio::test]
async fn an_acquisition_dropped_before_its_reply_is_released_though_redis_missed_the_first_release()
{
    let (server, proxy, client) = behind_proxy().await;
    let lock = client
        .lock_with(
            "dropped",
            LockOptions::default().ttl(Duration::from_secs(60)),
        )
        .unwrap();
    // Its caller stops waiting before the reply comes; the acquisition
    // lands all the same, and the release that gives it back, and its
    // resend, never reach Redis.
    proxy.delay_replies(Duration::from_millis(300));
    let waited = tokio::time::timeout(Duration::from_millis(50), lock.acquire(Wait::Once)).await;
    assert!(waited.is_err(), "answered within 50 ms: {waited:?}");
    proxy.cut_on(&script(&server, "mutex release"), Cut::BeforeForward, 2);
    // A release is sent once the acquisition has landed.
    assert!(
        eventually(Duration::from_secs(10), || proxy.cuts_done() == 2).await,
        "the acquisition was never given back"
    );
    assert!(
        freed_early(&server, "dropped").await,
        "a lock nobody holds stayed taken"
    );
}

#[tokio::test]
async fn a_release_tried_again_for_a_dropped_acquisition_never_ends_a_later_holding_of_its_owner() {
    let (server, proxy, client) = behind_proxy().await;
    let options = LockOptions::default()
        .ttl(Duration::from_secs(60))
        .queue_after(Duration::from_secs(60));
    let lock = client.lock_with("race", options.clone()).unwrap();
    // A wait of the same owner (a clone of the handle) sleeps behind another
    // client's holding, listening for release messages.
    let rival = Client::connect(&server.url()).await.unwrap();
    rival
        .lock_with("race", options)
        .unwrap()
        .acquire(Wait::Once)
        .await
        .unwrap();
    let clone = lock.clone();
    let scripts_run = server.calls("evalsha");
    let waiting = tokio::spawn(async move {
        let held = clone.acquire(Wait::For(Duration::from_secs(30))).await;
        (held, clone)
    });
    // Sleeping once it listens and its first attempt ran (else that attempt
    // may find the lock freed below, and take it).
    assert!(
        eventually(Duration::from_secs(5), || server
            .subscribers("rlock:{race}:released")
            == 1
            && server.calls("evalsha") > scripts_run)
        .await
    );
    // That holding ends without a message: the lock is free, the wait sleeps on.
    let _: () = server.conn().del("rlock:{race}").unwrap();
    // The owner's attempt is dropped before its reply; it lands. The release
    // that gives it back is applied and its reply lost, twice: its message
    // wakes the clone's wait, which takes the lock afresh.
    proxy.delay_replies(Duration::from_millis(300));
    let dropped = tokio::time::timeout(Duration::from_millis(50), lock.acquire(Wait::Once)).await;
    assert!(dropped.is_err(), "answered within 50 ms: {dropped:?}");
    proxy.cut_on(&script(&server, "mutex release"), Cut::AfterForward, 2);
    let (held, clone) = finished(waiting, Duration::from_secs(20)).await;
    let held = held.unwrap();
    proxy.delay_replies(Duration::ZERO);
    assert_eq!(proxy.cuts_done(), 2);
    // The owner's next acquisition starts once the dropped one's clean-up is
    // done (every try of its release): the clone's holding is still there.
    let again = lock.acquire(Wait::Once).await.unwrap();
    assert_eq!(again.fencing_token, held.fencing_token);
    assert_eq!(again.count, 2, "the clone's holding was released");
    assert_eq!(count(&server, "race"), Some(2));
    assert_eq!(clone.lost(), None);
    assert_eq!(lock.release().await.unwrap(), 1);
    assert_eq!(clone.release().await.unwrap(), 0);
}

#[tokio::test]
async fn a_run_once_job_dropped_before_it_ran_is_given_back_though_redis_missed_the_first_release()
{
    let (server, proxy, client) = behind_proxy().await;
    let job = client
        .start_job("report", JobOptions::default())
        .await
        .unwrap()
        .expect("nobody else runs it");
    proxy.cut_on(&script(&server, "mutex release"), Cut::BeforeForward, 2);
    drop(job);
    assert!(
        eventually(Duration::from_secs(10), || proxy.cuts_done() == 2).await,
        "the job's lock was never given back"
    );
    assert!(
        freed_early(&server, "report").await,
        "a job nobody ran stayed taken for its at_most"
    );
}

#[tokio::test]
async fn a_join_whose_reply_was_lost_stands_in_line_once_and_the_emptied_line_leaves_nothing() {
    let server = RedisServer::start();
    let holder = Client::connect(&server.url()).await.unwrap();
    let held = holder.lock("line-join").unwrap();
    held.acquire(Wait::Once).await.unwrap();
    let proxy = FaultProxy::start(server.port);
    let client = Client::connect(&proxy.url()).await.unwrap();
    let fair = || LockOptions::default().fair(true);
    let wait = |lock: rlock_core::Lock| {
        tokio::spawn(async move {
            lock.acquire(Wait::For(Duration::from_secs(10))).await?;
            lock.release().await
        })
    };
    // A first waiter: the client then listens on the line's channel, and
    // the second joins the line with its first attempt.
    let first = wait(client.lock_with("line-join", fair()).unwrap());
    assert!(
        in_line(&server, "rlock:{line-join}", 1).await,
        "the first never stood in line"
    );
    let second = client.lock_with("line-join", fair()).unwrap();
    let owner = second.owner().to_owned();
    proxy.cut_on(owner.as_bytes(), Cut::AfterForward, 1);
    let second = wait(second);
    assert!(
        in_line(&server, "rlock:{line-join}", 2).await,
        "the second never stood in line"
    );
    assert!(
        eventually(Duration::from_secs(5), || proxy.cuts_done() == 1).await,
        "the join's reply was not cut"
    );
    // Sent again on a fresh connection: recognised, not queued twice.
    let line: Vec<String> = server
        .conn()
        .lrange("rlock:{line-join}:queue", 0, -1)
        .unwrap();
    assert_eq!(line.iter().filter(|o| **o == owner).count(), 1, "{line:?}");
    held.release().await.unwrap();
    assert_eq!(finished(first, Duration::from_secs(5)).await.unwrap(), 0);
    assert_eq!(finished(second, Duration::from_secs(5)).await.unwrap(), 0);
    // Both handed the lock in turn; the line, emptied, took its leases
    // (and join times) with it.
    let mut conn = server.conn();
    let left: Vec<String> = [
        "rlock:{line-join}",
        "rlock:{line-join}:queue",
        "rlock:{line-join}:leases",
    ]
    .into_iter()
    .filter(|k| conn.exists::<_, bool>(*k).unwrap())
    .map(String::from)
    .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}
