//! Waiting: woken by the release message, bounded by the holder's lease,
//! never polling, and never broken by a foreign key; after `queue_after`, a
//! place in line that releases hand the lock to.

use std::time::{Duration, Instant};

use redis::Commands;
use rlock_core::{Client, LockOptions, Wait};
use rlock_test_support::{eventually, finished, RedisServer};

/// Loads the scripts into Redis, so counted cycles carry no SCRIPT LOAD.
async fn warm_up(client: &Client) {
    let lock = client.lock("warm-up").unwrap();
    lock.acquire(Wait::Once).await.unwrap();
    lock.release().await.unwrap();
}

/// A waiter that competes for every release however long it waits (the way
/// every waiter starts).
fn competing() -> LockOptions {
    LockOptions::default().queue_after(Duration::from_secs(600))
}

/// Counts the `evalsha` calls in what a monitor saw.
fn evalshas(sent: &[String]) -> usize {
    sent.iter().filter(|c| *c == "evalsha").count()
}

#[tokio::test]
async fn a_waiter_wakes_on_the_release_message_long_before_the_lease_would_end() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    warm_up(&client).await;
    let holder = client
        .lock_with("busy", LockOptions::default().ttl(Duration::from_secs(20)))
        .unwrap();
    holder.acquire(Wait::Once).await.unwrap();

    let other = Client::connect(&redis.url()).await.unwrap();
    let mut monitor = redis.monitor();
    let waiter = other.lock_with("busy", competing()).unwrap();
    let waiting =
        tokio::spawn(async move { waiter.acquire(Wait::For(Duration::from_secs(15))).await });
    assert!(
        eventually(Duration::from_secs(5), || redis
            .subscribers("rlock:{busy}:released")
            == 1)
        .await,
        "the waiter subscribes to the release channel"
    );
    // Its two attempts (before and after subscribing), then it sleeps.
    let mut attempts = 0;
    assert!(
        eventually(Duration::from_secs(5), || {
            attempts += evalshas(&monitor.mark());
            attempts >= 2
        })
        .await
    );
    assert_eq!(attempts, 2);
    let released = Instant::now();
    holder.release().await.unwrap();
    let got = finished(waiting, Duration::from_secs(5)).await;
    assert!(got.is_ok(), "{got:?}");
    // The lease had ~20 s left: only the message can explain a wake this soon.
    assert!(released.elapsed() < Duration::from_secs(5));
    // The release, then the woken waiter's one attempt: no polling meanwhile.
    let sent = monitor.mark();
    assert_eq!(evalshas(&sent), 2, "{sent:?}");
    assert!(
        eventually(Duration::from_secs(5), || redis
            .subscribers("rlock:{busy}:released")
            == 0)
        .await,
        "the subscription is dropped when the last waiter leaves"
    );
}

#[tokio::test]
async fn idle_waiters_send_no_commands_and_a_release_wakes_one_per_client() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    warm_up(&client).await;
    let holder = client
        .lock_with("crowd", LockOptions::default().ttl(Duration::from_secs(30)))
        .unwrap();
    holder.acquire(Wait::Once).await.unwrap();
    let waiters = Client::connect(&redis.url()).await.unwrap();
    let mut monitor = redis.monitor();
    let (done_tx, mut done) = tokio::sync::mpsc::unbounded_channel();
    for i in 0..20 {
        let lock = waiters.lock_with("crowd", competing()).unwrap();
        let done_tx = done_tx.clone();
        let gate = holder.clone();
        tokio::spawn(async move {
            lock.acquire(Wait::Forever).await.unwrap();
            done_tx.send(i).unwrap();
            // Hold until the test lets go, so handoffs are counted one by one.
            let _ = gate.name();
            lock
        });
    }
    assert!(
        eventually(Duration::from_secs(5), || redis
            .subscribers("rlock:{crowd}:released")
            == 1)
        .await,
        "twenty waiters of one client share one subscription"
    );
    // Each waiter makes two attempts, then sleeps.
    let mut attempts = 0;
    assert!(
        eventually(Duration::from_secs(5), || {
            attempts += evalshas(&monitor.mark());
            attempts >= 40
        })
        .await
    );
    assert_eq!(attempts, 40);
    // Idle: a window of silence.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let idle = monitor.mark();
    assert!(idle.is_empty(), "idle waiters sent {idle:?}");

    // One release wakes exactly one waiter of that client: one attempt.
    holder.release().await.unwrap();
    let first = tokio::time::timeout(Duration::from_secs(5), done.recv())
        .await
        .unwrap()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let sent = monitor.mark();
    assert_eq!(
        evalshas(&sent),
        2,
        "release + one woken attempt, not a herd: {sent:?}"
    );
    assert!(first < 20);
}

#[tokio::test]
async fn a_waiter_whose_holder_vanished_acquires_when_the_lease_ends() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    // A holder that never renews and never releases: a crashed process.
    let opts = LockOptions::default()
        .ttl(Duration::from_millis(700))
        .auto_renew(false);
    client
        .lock_with("orphan", opts)
        .unwrap()
        .acquire(Wait::Once)
        .await
        .unwrap();
    let start = Instant::now();
    let waiter = client.lock("orphan").unwrap();
    waiter
        .acquire(Wait::For(Duration::from_secs(10)))
        .await
        .unwrap();
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_millis(500),
        "acquired before the lease ended: {waited:?}"
    );
    assert!(
        waited < Duration::from_secs(3),
        "stranded past the lease: {waited:?}"
    );
}

#[tokio::test]
async fn a_key_of_another_type_counts_as_held_until_it_expires() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    // An older `SET NX PX` lock on the same key.
    let _: () = redis::cmd("SET")
        .arg("rlock:{legacy}")
        .arg("token")
        .arg("NX")
        .arg("PX")
        .arg(600)
        .query(&mut redis.conn())
        .unwrap();
    let lock = client.lock("legacy").unwrap();
    assert_eq!(lock.try_acquire().await.unwrap(), None);
    assert!(lock.locked().await.unwrap());
    assert!(!lock.owned().await.unwrap());
    assert_eq!(lock.release().await.unwrap_err().category(), "not owner");
    let start = Instant::now();
    lock.acquire(Wait::For(Duration::from_secs(5)))
        .await
        .unwrap();
    assert!(start.elapsed() < Duration::from_secs(3));
    let kind: String = redis::cmd("TYPE")
        .arg("rlock:{legacy}")
        .query(&mut redis.conn())
        .unwrap();
    assert_eq!(kind, "hash");
}

#[tokio::test]
async fn a_timeout_is_honoured_and_leaves_nothing_behind() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let holder = client.lock("held").unwrap();
    holder.acquire(Wait::Once).await.unwrap();
    let waiter = client.lock("held").unwrap();
    let start = Instant::now();
    let err = waiter
        .acquire(Wait::For(Duration::from_millis(300)))
        .await
        .unwrap_err();
    assert_eq!(err.category(), "timeout");
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_millis(300) && waited < Duration::from_secs(2),
        "{waited:?}"
    );
    assert_eq!(waiter.try_acquire().await.unwrap(), None);
    let owner: String = redis.conn().hget("rlock:{held}", "owner").unwrap();
    assert_eq!(owner, holder.owner());
}

#[tokio::test]
async fn a_cancelled_wait_leaves_no_lock_behind() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let holder = client.lock("cancel").unwrap();
    holder.acquire(Wait::Once).await.unwrap();
    let waiter = client.lock_with("cancel", competing()).unwrap();
    let w = waiter.clone();
    let task = tokio::spawn(async move { w.acquire(Wait::Forever).await });
    assert!(
        eventually(Duration::from_secs(5), || redis
            .subscribers("rlock:{cancel}:released")
            == 1)
        .await
    );
    task.abort();
    let _ = task.await;
    holder.release().await.unwrap();
    assert!(
        eventually(Duration::from_secs(5), || redis
            .subscribers("rlock:{cancel}:released")
            == 0)
        .await
    );
    assert!(!waiter.locked().await.unwrap());
}

/// How many waiters stand in the line of lock `name` (read apart from the
/// client, so monitors count only the lock's own commands).
fn in_line(redis: &RedisServer, name: &str) -> usize {
    redis
        .conn()
        .llen(format!("rlock:{{{name}}}:queue"))
        .unwrap()
}

async fn until_in_line(redis: &RedisServer, name: &str, n: usize) {
    assert!(
        eventually(Duration::from_secs(10), || in_line(redis, name) == n).await,
        "never {n} in line"
    );
}

#[tokio::test]
async fn a_waiter_past_queue_after_is_handed_the_lock_before_the_holder_can_retake_it() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    warm_up(&client).await;
    let holder = client
        .lock_with(
            "starve",
            LockOptions::default().ttl(Duration::from_secs(30)),
        )
        .unwrap();
    holder.acquire(Wait::Once).await.unwrap();
    let other = Client::connect(&redis.url()).await.unwrap();
    let mut monitor = redis.monitor();
    let waiter = other.lock("starve").unwrap();
    let w = waiter.clone();
    let waiting = tokio::spawn(async move { w.acquire(Wait::For(Duration::from_secs(15))).await });
    until_in_line(&redis, "starve", 1).await;
    // Two attempts competing (before and after subscribing), a third that
    // took a place in line after `queue_after`; then it sleeps.
    let mut attempts = 0;
    assert!(
        eventually(Duration::from_secs(5), || {
            attempts += evalshas(&monitor.mark());
            attempts >= 3
        })
        .await
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    attempts += evalshas(&monitor.mark());
    assert_eq!(attempts, 3);

    // The holder releases and asks again at once, as a loop would: the
    // release handed the lock to the waiter in line, so it finds it busy.
    let released = Instant::now();
    holder.release().await.unwrap();
    assert_eq!(holder.try_acquire().await.unwrap(), None);
    let got = finished(waiting, Duration::from_secs(5)).await;
    assert!(got.is_ok(), "{got:?}");
    assert!(released.elapsed() < Duration::from_secs(5));
    // The release, the holder's try: the waiter learnt it from the handoff
    // message, with no attempt of its own.
    let sent = monitor.mark();
    assert_eq!(evalshas(&sent), 2, "{sent:?}");
    assert!(waiter.owned().await.unwrap());
    assert_eq!(in_line(&redis, "starve"), 0);
}

#[tokio::test]
async fn a_waiter_that_finds_others_in_line_joins_it_at_once() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let holder = client
        .lock_with("line", LockOptions::default().ttl(Duration::from_secs(30)))
        .unwrap();
    holder.acquire(Wait::Once).await.unwrap();
    let first_client = Client::connect(&redis.url()).await.unwrap();
    let first = first_client.lock("line").unwrap();
    let f = first.clone();
    let first_waits = tokio::spawn(async move {
        let got = f.acquire(Wait::For(Duration::from_secs(15))).await;
        f.release().await.unwrap();
        got
    });
    until_in_line(&redis, "line", 1).await;
    // This one would compete for ten minutes, but releases now go to the
    // line and send no release message: it must queue behind the first.
    let second_client = Client::connect(&redis.url()).await.unwrap();
    let second = second_client.lock_with("line", competing()).unwrap();
    let s = second.clone();
    let second_waits =
        tokio::spawn(async move { s.acquire(Wait::For(Duration::from_secs(15))).await });
    until_in_line(&redis, "line", 2).await;
    holder.release().await.unwrap();
    let a = finished(first_waits, Duration::from_secs(5)).await.unwrap();
    let b = finished(second_waits, Duration::from_secs(5))
        .await
        .unwrap();
    assert!(
        b.fencing_token > a.fencing_token,
        "handed over in line order: {a:?} then {b:?}"
    );
    assert!(second.owned().await.unwrap());
}

#[tokio::test]
async fn a_wait_abandoned_after_a_handoff_does_not_spoil_the_same_owners_next_wait() {
    // One thread: the clean-up of the abandoned wait runs only when the test
    // yields, so the next wait would win the race to Redis without the gate.
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let holder = client
        .lock_with("gone", LockOptions::default().ttl(Duration::from_secs(30)))
        .unwrap();
    holder.acquire(Wait::Once).await.unwrap();
    let other = Client::connect(&redis.url()).await.unwrap();
    let waiter = other.lock("gone").unwrap();
    let mut waiting = Box::pin(waiter.acquire(Wait::Forever));
    tokio::select! {
        got = &mut waiting => panic!("acquired while held: {got:?}"),
        _ = until_in_line(&redis, "gone", 1) => {}
    }
    // A release hands the lock to the waiter; its message is not read yet.
    let fence = redis.hand_over_silently("gone", waiter.owner());
    // The caller gives up on that wait, and at once waits again.
    drop(waiting);
    let got = waiter
        .acquire(Wait::For(Duration::from_secs(5)))
        .await
        .unwrap();
    // The abandoned wait's grant was passed on (by its clean-up) before
    // this wait began: it holds a grant of its own, which nothing undoes.
    assert!(
        got.fencing_token > fence,
        "{got:?} is the abandoned wait's grant, which its clean-up releases"
    );
    assert!(waiter.owned().await.unwrap());
    let mut c = redis.conn();
    let owner: Option<String> = c.hget("rlock:{gone}", "owner").unwrap();
    let held: Option<u64> = c.hget("rlock:{gone}", "fence").unwrap();
    assert_eq!(owner.as_deref(), Some(waiter.owner()));
    assert_eq!(held, Some(got.fencing_token));
}
