//! Inspection, events and counters: who holds a lock and who waits, the
//! held locks listed, an operator's forced release through the protocol, a
//! lost lease told exactly once, and the counts of a client's cycles.

use std::collections::HashSet;
use std::time::Duration;

use redis::Commands;
use rlock_core::{Client, Error, Event, Lock, LockOptions, LostReason, NotOwnedReason, Wait};
use rlock_test_support::{eventually, RedisServer};

fn fair() -> LockOptions {
    LockOptions::default().fair(true)
}

/// A fair waiter of `client` on `name`, waiting up to 15 s, once it stands
/// in the line: its task ends with its lock handle once it holds it.
async fn waiter_in_line(
    redis: &RedisServer,
    client: &Client,
    name: &str,
) -> tokio::task::JoinHandle<Result<Lock, Error>> {
    let queued = client.lock_with(name, fair()).unwrap();
    let waiting = tokio::spawn(async move {
        queued
            .acquire(Wait::For(Duration::from_secs(15)))
            .await
            .map(|_| queued)
    });
    let line = format!("rlock:{{{name}}}:queue");
    assert!(
        eventually(Duration::from_secs(5), || redis
            .conn()
            .llen::<_, i64>(&line)
            .unwrap()
            == 1)
        .await,
        "the waiter never stood in line"
    );
    waiting
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_names_the_holder_s_host_pid_and_unit_and_the_waiters_in_line() {
    let redis = RedisServer::start();
    let holder = Client::connect(&redis.url()).await.unwrap();
    let waiter = Client::connect(&redis.url()).await.unwrap();
    let lock = holder.lock("product:1001").unwrap();
    lock.acquire(Wait::Once).await.unwrap();
    let queued = waiter.lock_with("product:1001", fair()).unwrap();
    let wait = tokio::spawn(async move {
        queued.acquire(Wait::Forever).await.unwrap();
        queued
    });
    let seen = holder.clone();
    assert!(
        eventually(Duration::from_secs(5), || {
            let redis = &redis;
            redis
                .conn()
                .llen::<_, i64>("rlock:{product:1001}:queue")
                .unwrap()
                == 1
        })
        .await
    );
    let view = seen.inspect("product:1001").await.unwrap();
    let h = view.holder.expect("a holder");
    assert_eq!(h.owner, lock.owner());
    assert_eq!(h.client_id, holder.id());
    let info = h.client.expect("the holder's registration");
    assert_eq!(info.pid, Some(std::process::id()));
    assert_eq!(info.face, "rust");
    assert_eq!(info.version, env!("CARGO_PKG_VERSION"));
    assert!(!info.host.is_empty() && info.host != "unknown");
    assert!(view.state.held_for.is_some(), "held since the grant");
    assert_eq!(view.waiters.len(), 1);
    assert_eq!(view.waiters[0].client_id, waiter.id());
    assert!(view.waiters[0].client.is_some());
    assert!(view.waiters[0].waited.is_some(), "in line since it joined");
    assert!(h.waited.is_none(), "a holder waits for nothing");
    let later = seen.inspect("product:1001").await.unwrap();
    assert!(
        later.waiters[0].waited >= view.waiters[0].waited,
        "its wait grows"
    );

    // The operator's forced release hands it to the waiter in line.
    let forced = seen.force_unlock("product:1001").await.unwrap();
    assert_eq!(
        forced.and_then(|f| f.holder).map(|h| h.owner),
        Some(lock.owner().to_owned())
    );
    let queued = tokio::time::timeout(Duration::from_secs(5), wait)
        .await
        .expect("the waiter was handed the lock")
        .unwrap();
    let now = seen.inspect("product:1001").await.unwrap();
    assert_eq!(now.state.owner.as_deref(), Some(queued.owner()));
    // ... and the forced-out holder hears of it, as such, at its next
    // renewal.
    let lost = tokio::time::timeout(Duration::from_secs(15), lock.lost_signal())
        .await
        .expect("told of the loss");
    assert_eq!(lost, Some(LostReason::Forced));
    assert!(seen
        .force_unlock("nobody-holds-this")
        .await
        .unwrap()
        .is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_names_the_readers_the_writer_and_the_permit_holders_of_the_name() {
    let redis = RedisServer::start();
    let a = Client::connect(&redis.url()).await.unwrap();
    let b = Client::connect(&redis.url()).await.unwrap();
    let free = a.inspect("shared").await.unwrap();
    assert!(
        free.rwlock.is_none() && free.semaphore.is_none(),
        "nobody holds them"
    );

    let read_a = a.rw_lock("shared", LockOptions::default()).unwrap();
    let read_b = b.rw_lock("shared", LockOptions::default()).unwrap();
    read_a.read().acquire(Wait::Once).await.unwrap();
    read_b.read().acquire(Wait::Once).await.unwrap();
    let permits = b.semaphore("shared", 4, LockOptions::default()).unwrap();
    permits.acquire(3, Wait::Once).await.unwrap();

    let seen = a.inspect("shared").await.unwrap();
    assert!(!seen.state.held, "the mutex of the name is another lock");
    let rw = seen.rwlock.expect("the read-write lock is held");
    let mut readers: Vec<&str> = rw.holders.iter().map(|p| p.client_id.as_str()).collect();
    readers.sort_unstable();
    let mut both = vec![a.id(), b.id()];
    both.sort_unstable();
    assert_eq!(readers, both);
    assert!(rw.state.holders.iter().all(|h| !h.writes()));
    assert!(rw
        .holders
        .iter()
        .all(|p| p.client.as_ref().is_some_and(|c| c.face == "rust")));
    let sem = seen.semaphore.expect("the semaphore is held");
    assert_eq!(sem.holders.len(), 1);
    assert_eq!(sem.holders[0].client_id, b.id());
    assert_eq!(sem.state.holders[0].permits, 3);

    let json = a.inspect("shared").await.unwrap().to_json();
    assert_eq!(json["rwlock"]["readers"], 2);
    assert_eq!(json["rwlock"]["held_by"][0]["mode"], "read");
    assert_eq!(json["semaphore"]["used"], 3);
    assert_eq!(json["semaphore"]["held_by"][0]["permits"], 3);
    assert_eq!(json["semaphore"]["held_by"][0]["client_id"], b.id());
}

/// The operator's forced release, whose reply is lost once and which is
/// sent again (recognised as done), and the holder's own release after it,
/// before any renewal told the holder: refused, and the holding lost,
/// whether the lock was handed to a waiter or deleted and taken since.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_forced_release_the_holders_own_release_is_refused_not_taken_for_its_own() {
    let (redis, proxy, operator) = rlock_test_support::behind_proxy().await;
    let holder = Client::connect(&redis.url()).await.unwrap();
    let other = Client::connect(&redis.url()).await.unwrap();
    let leased = || LockOptions::default().ttl(Duration::from_secs(20));

    // Handed over: a waiter in line gets it.
    let held = holder.lock_with("fu:a", leased()).unwrap();
    held.acquire(Wait::Once).await.unwrap();
    let waiting = waiter_in_line(&redis, &other, "fu:a").await;
    proxy.cut_on(
        b"rlock:{fu:a}:forced",
        rlock_test_support::Cut::AfterForward,
        1,
    );
    let freed = operator.force_unlock("fu:a").await.unwrap();
    assert_eq!(proxy.cuts_done(), 1, "the first reply was lost");
    assert!(freed.is_some(), "sent again, and answered as done");
    let next = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("the waiter was handed it")
        .unwrap()
        .unwrap();
    let refused = held.release().await;
    assert!(
        matches!(
            refused,
            Err(Error::NotOwned {
                reason: NotOwnedReason::Forced,
                ..
            })
        ),
        "the holder is told an operator ended it: {refused:?}"
    );
    assert_eq!(held.lost(), None, "released: nothing left to lose");
    let owner: String = redis.conn().hget("rlock:{fu:a}", "owner").unwrap();
    assert_eq!(owner, next.owner(), "the waiter's holding untouched");

    // Deleted (nobody in line), then taken by another: still refused.
    let held = holder.lock_with("fu:b", leased()).unwrap();
    held.acquire(Wait::Once).await.unwrap();
    proxy.cut_on(
        b"rlock:{fu:b}:forced",
        rlock_test_support::Cut::AfterForward,
        1,
    );
    assert!(operator.force_unlock("fu:b").await.unwrap().is_some());
    assert_eq!(proxy.cuts_done(), 2);
    let taker = other.lock("fu:b").unwrap();
    taker.acquire(Wait::Once).await.unwrap();
    let refused = held.release().await;
    assert!(
        matches!(
            refused,
            Err(Error::NotOwned {
                reason: NotOwnedReason::Forced,
                ..
            })
        ),
        "{refused:?}"
    );
    let owner: String = redis.conn().hget("rlock:{fu:b}", "owner").unwrap();
    assert_eq!(owner, taker.owner());
}

/// The holder's release sent twice (its first send cut before Redis saw
/// it) after the operator freed its holding and the waiter it went to has
/// released too: the resend finds the lock gone, which a lease still valid
/// by the holder's clock would take for its own first send landing; the
/// operator's mark says otherwise.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resent_release_after_a_forced_one_is_refused_even_once_the_lock_moved_on() {
    let (redis, proxy, holder) = rlock_test_support::behind_proxy().await;
    let operator = Client::connect(&redis.url()).await.unwrap();
    let other = Client::connect(&redis.url()).await.unwrap();
    let held = holder
        .lock_with("fu:c", LockOptions::default().ttl(Duration::from_secs(20)))
        .unwrap();
    held.acquire(Wait::Once).await.unwrap();
    let waiting = waiter_in_line(&redis, &other, "fu:c").await;
    assert!(operator.force_unlock("fu:c").await.unwrap().is_some());
    let next = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    next.release().await.unwrap();
    proxy.cut_on(
        b"rlock:{fu:c}:forced",
        rlock_test_support::Cut::BeforeForward,
        1,
    );
    let refused = held.release().await;
    assert_eq!(proxy.cuts_done(), 1, "the first send was cut");
    assert!(
        matches!(refused, Err(Error::NotOwned { .. })),
        "{refused:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forced_release_wakes_the_waiters_that_are_not_in_line() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let lock = client.lock("stuck").unwrap();
    lock.acquire(Wait::Once).await.unwrap();
    let other = Client::connect(&redis.url()).await.unwrap();
    let rival = other.lock("stuck").unwrap();
    let started = std::time::Instant::now();
    let wait = tokio::spawn(async move { rival.acquire(Wait::Forever).await.map(|_| ()) });
    // Waiting once it listens for the release message.
    assert!(
        eventually(Duration::from_secs(5), || redis
            .subscribers("rlock:{stuck}:released")
            >= 1)
        .await
    );
    other
        .force_unlock("stuck")
        .await
        .unwrap()
        .expect("it was held");
    tokio::time::timeout(Duration::from_secs(3), wait)
        .await
        .expect("woken by the release message, not by its lease of 30 s")
        .unwrap()
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_client_s_registration_is_deleted_and_a_running_one_has_a_lease() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let key = format!("rlock:client:{{{}}}", client.id());
    let pttl: i64 = redis.conn().pttl(&key).unwrap();
    assert!(pttl > 0 && pttl <= 30_000, "registration lease {pttl}");
    client.close().await;
    let exists: bool = redis.conn().exists(&key).unwrap();
    assert!(!exists, "deleted at close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn someone_else_s_data_in_the_registration_key_is_reported_and_left_alone() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let mut events = client.events();
    let key = format!("rlock:client:{{{}}}", client.id());
    let _: () = redis.conn().set(&key, "not yours").unwrap();
    // The next renewal finds it: by the watchdog's tick (every second for
    // this lease) once the registration is 10 s old.
    let held = client
        .lock_with("held", LockOptions::default().ttl(Duration::from_secs(3)))
        .unwrap();
    held.acquire(Wait::Once).await.unwrap();
    let event = tokio::time::timeout(Duration::from_secs(20), events.recv())
        .await
        .expect("reported")
        .unwrap();
    assert!(
        matches!(&event, Event::Error { message } if message.contains(&key)),
        "{event:?}"
    );
    let value: String = redis.conn().get(&key).unwrap();
    assert_eq!(value, "not yours");
    client.close().await;
    let value: String = redis.conn().get(&key).unwrap();
    assert_eq!(value, "not yours", "close leaves it alone too");
    let lock = client.lock("x").unwrap();
    assert!(lock.acquire(Wait::Once).await.is_err(), "closed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_lease_is_one_event_and_one_count_with_its_reason() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let mut events = client.events();
    let opts = LockOptions::default().ttl(Duration::from_millis(900));
    let lock = client.lock_with("victim", opts).unwrap();
    let got = lock.acquire(Wait::Once).await.unwrap();
    let _: () = redis.conn().del("rlock:{victim}").unwrap();
    let event = tokio::time::timeout(Duration::from_secs(5), events.recv())
        .await
        .expect("told")
        .unwrap();
    assert_eq!(
        event,
        Event::Lost {
            name: "victim".into(),
            reason: LostReason::Expired,
            fence: got.fencing_token,
        }
    );
    let _ = lock.finish().await;
    // Nothing more about it: the next event is one caused after this point.
    let other = client.lock("after").unwrap();
    other.acquire(Wait::Once).await.unwrap();
    let _: () = redis.conn().del("rlock:{after}").unwrap();
    let next = tokio::time::timeout(Duration::from_secs(60), events.recv())
        .await
        .expect("told")
        .unwrap();
    assert!(
        matches!(&next, Event::Lost { name, .. } if name == "after"),
        "{next:?}"
    );
    let stats = client.stats();
    let expired = stats
        .lost
        .iter()
        .find(|(r, _)| *r == LostReason::Expired)
        .map(|(_, n)| *n);
    assert_eq!(expired, Some(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_count_acquisitions_contention_releases_and_renewals() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    for _ in 0..3 {
        let lock = client.lock("counted").unwrap();
        lock.acquire(Wait::Once).await.unwrap();
        lock.release().await.unwrap();
    }
    let holder = client
        .lock_with(
            "busy",
            LockOptions::default().ttl(Duration::from_millis(600)),
        )
        .unwrap();
    holder.acquire(Wait::Once).await.unwrap();
    let rival = client.lock("busy").unwrap();
    let wait = tokio::spawn(async move {
        rival.acquire(Wait::Forever).await.unwrap();
        rival.release().await.unwrap();
    });
    // Held over a renewal, then released to the rival.
    assert!(eventually(Duration::from_secs(5), || client.stats().renewals >= 1).await);
    holder.release().await.unwrap();
    wait.await.unwrap();
    let s = client.stats();
    assert_eq!(s.acquisitions, 5);
    assert_eq!(s.contended_acquisitions, 1);
    assert_eq!(s.releases, 5);
    assert_eq!(s.wait.count, 5);
    assert_eq!(s.hold.count, 5);
    assert!(s.renewal_round_trips >= 1 && s.renewal_round_trips <= s.renewals);
    let text = s.prometheus();
    assert!(text.contains("rlock_acquisitions_total 5\n"), "{text}");
    assert!(text.contains("rlock_contended_acquisitions_total 1\n"));
    assert!(text.contains("rlock_lost_leases_total{reason=\"expired\"} 0\n"));
    assert!(text.contains("rlock_wait_seconds_bucket{le=\"+Inf\"} 5\n"));
    assert!(text.contains("# TYPE rlock_hold_seconds histogram\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_pages_through_ten_thousand_held_locks_and_returns_them_all() {
    let redis = RedisServer::start();
    // Held by a plain client, written the way acquire.lua writes them: a
    // 10,000-lock fixture made in one pipeline.
    let mut pipe = redis::pipe();
    for i in 0..10_000 {
        let key = format!("rlock:{{job:{i}}}");
        pipe.hset_multiple(&key, &[("owner", "c:h1"), ("count", "1"), ("fence", "1")])
            .ignore()
            .pexpire(&key, 600_000)
            .ignore();
    }
    // Not locks: other kinds of key of the prefix, and another prefix.
    pipe.hset("rlock:{job:1}:cached", "value", "x").ignore();
    pipe.hset("other:{job:1}", "owner", "c:h1").ignore();
    let _: () = pipe.query(&mut redis.conn()).unwrap();
    let client = Client::connect(&redis.url()).await.unwrap();
    let mut listing = client.list("job:*").unwrap();
    let mut names = HashSet::new();
    let mut pages = 0;
    while let Some(page) = listing.next_page().await.unwrap() {
        pages += 1;
        for l in page {
            assert_eq!(l.state.owner.as_deref(), Some("c:h1"));
            assert!(l.state.ttl_ms.is_some());
            names.insert(l.name);
        }
    }
    assert_eq!(names.len(), 10_000);
    assert!(pages >= 5, "SCAN in bounded steps: {pages} pages");
    let mut one = client.list("job:42").unwrap();
    let mut found = Vec::new();
    while let Some(page) = one.next_page().await.unwrap() {
        found.extend(page.into_iter().map(|l| l.name));
    }
    assert_eq!(found, vec!["job:42".to_owned()]);
    assert!(client.list("").is_err());
    assert!(client.list("job\\").is_err());
}
