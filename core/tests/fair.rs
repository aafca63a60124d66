//! Fair mode: waiters queue in Redis in arrival order, and a release hands the
//! lock straight to the first live one, who learns it from the message.

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::time::{Duration, Instant};

use redis::Commands;
use rlock_core::{Client, Error, Lock, LockOptions, Wait};
use rlock_test_support::{
    contend, eventually, finished, until_in_line, worker_args, worker_command, RedisServer,
};

fn fair(ttl: Duration) -> LockOptions {
    LockOptions::default().ttl(ttl).fair(true)
}

async fn waiting(lock: &Lock) -> u32 {
    lock.state().await.unwrap().waiting
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_waiters_in_three_processes_get_the_lock_in_arrival_order() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let holder = client
        .lock_with("fifo", fair(Duration::from_secs(30)))
        .unwrap();
    holder.acquire(Wait::Once).await.unwrap();
    let mut workers: Vec<_> = (0..3)
        .map(|_| {
            worker_command("fair_worker", &[redis.url(), "fifo".into()])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for id in 0..10u32 {
        let w = &mut workers[id as usize % 3];
        writeln!(w.stdin.as_mut().unwrap(), "{id}").unwrap();
        until_in_line(&holder, id + 1).await;
    }
    holder.release().await.unwrap();
    let mut got = Vec::new();
    for mut w in workers {
        drop(w.stdin.take()); // the worker finishes its waiters, then exits
        let out = BufReader::new(w.stdout.take().unwrap());
        for line in out.lines() {
            let line = line.unwrap();
            if let Some(rest) = line.strip_prefix("GOT ") {
                let (id, fence) = rest.split_once(' ').unwrap();
                got.push((fence.parse::<u64>().unwrap(), id.parse::<u32>().unwrap()));
            }
        }
        assert!(w.wait().unwrap().success());
    }
    got.sort();
    let order: Vec<u32> = got.iter().map(|(_, id)| *id).collect();
    assert_eq!(
        order,
        (0..10).collect::<Vec<_>>(),
        "handed over in arrival order"
    );
}

/// Reads waiter ids on stdin; each becomes a fair waiter of the named lock
/// that prints `GOT <id> <fence>` when it holds it, then releases it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the worker process of ten_waiters_in_three_processes_get_the_lock_in_arrival_order, not a test of its own"]
async fn fair_worker() {
    let args = worker_args();
    let client = Client::connect(&args[0]).await.unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            tx.send(line.unwrap()).unwrap();
        }
    });
    let mut waiters = Vec::new();
    while let Some(id) = rx.recv().await {
        let lock = client
            .lock_with(&args[1], fair(Duration::from_secs(30)))
            .unwrap();
        waiters.push(tokio::spawn(async move {
            let held = lock.acquire(Wait::Forever).await.unwrap();
            println!("GOT {id} {}", held.fencing_token);
            lock.release().await.unwrap();
        }));
    }
    for w in waiters {
        w.await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_looping_acquire_release_cannot_retake_the_lock_while_others_wait() {
    let redis = RedisServer::start();
    // A gate holds the lock until all four are in line, so they start together.
    let gate_client = Client::connect(&redis.url()).await.unwrap();
    let gate = gate_client
        .lock_with("turns", fair(Duration::from_secs(30)))
        .unwrap();
    gate.acquire(Wait::Once).await.unwrap();
    let mut tasks = Vec::new();
    for who in 0..4u32 {
        let client = Client::connect(&redis.url()).await.unwrap();
        tasks.push(tokio::spawn(async move {
            let lock = client
                .lock_with("turns", fair(Duration::from_secs(30)))
                .unwrap();
            let mut fences = Vec::new();
            for _ in 0..15 {
                fences.push(lock.acquire(Wait::Forever).await.unwrap().fencing_token);
                lock.release().await.unwrap();
            }
            fences
                .into_iter()
                .map(move |f| (f, who))
                .collect::<Vec<_>>()
        }));
    }
    until_in_line(&gate, 4).await;
    gate.release().await.unwrap();
    let mut turns = Vec::new();
    for t in tasks {
        turns.extend(t.await.unwrap());
    }
    turns.sort();
    let order: Vec<u32> = turns.iter().map(|(_, who)| *who).collect();
    // A worker takes two turns in a row only once everyone else is done, or
    // once in a while when another was not in line at that moment (on a
    // loaded machine a worker can be descheduled between its release and its
    // next place in line, and then a retake is fair). A lock that let the
    // looping holder barge in would retake it at nearly every turn.
    let retakes = (1..order.len())
        .filter(|&i| order[i] == order[i - 1] && !order[i..].iter().all(|w| *w == order[i]))
        .count();
    assert!(
        retakes <= 2,
        "{retakes} turns taken twice in a row while others were not done: {order:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_killed_while_queued_is_skipped() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let holder = client
        .lock_with("skip", fair(Duration::from_secs(30)))
        .unwrap();
    holder.acquire(Wait::Once).await.unwrap();
    let mut doomed = worker_command("fair_worker", &[redis.url(), "skip".into()])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    writeln!(doomed.stdin.as_mut().unwrap(), "0").unwrap();
    until_in_line(&holder, 1).await;
    let other = Client::connect(&redis.url()).await.unwrap();
    let next = other
        .lock_with("skip", fair(Duration::from_secs(30)))
        .unwrap();
    let waiting = tokio::spawn({
        let next = next.clone();
        async move { next.acquire(Wait::For(Duration::from_secs(20))).await }
    });
    until_in_line(&holder, 2).await;
    doomed.kill().unwrap(); // SIGKILL
    doomed.wait().unwrap();
    let released = Instant::now();
    holder.release().await.unwrap();
    let got = finished(waiting, Duration::from_secs(5)).await;
    assert!(got.is_ok(), "{got:?}");
    assert!(
        released.elapsed() < Duration::from_secs(2),
        "{:?}",
        released.elapsed()
    );
    assert!(next.owned().await.unwrap());
}

#[tokio::test]
async fn a_timeout_and_a_cancelled_wait_leave_no_entry_and_no_stranded_lock() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let holder = client
        .lock_with("leave", fair(Duration::from_secs(30)))
        .unwrap();
    holder.acquire(Wait::Once).await.unwrap();

    let timed_out = client
        .lock_with("leave", fair(Duration::from_secs(30)))
        .unwrap();
    let err = timed_out
        .acquire(Wait::For(Duration::from_millis(300)))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Timeout { .. }), "{err:?}");
    assert_eq!(
        waiting(&holder).await,
        0,
        "the timed-out waiter left the line"
    );

    let cancelled = client
        .lock_with("leave", fair(Duration::from_secs(30)))
        .unwrap();
    let task = tokio::spawn({
        let cancelled = cancelled.clone();
        async move { cancelled.acquire(Wait::Forever).await }
    });
    until_in_line(&holder, 1).await;
    task.abort();
    let _ = task.await;
    until_in_line(&holder, 0).await;

    // Cancelled just as the lock is handed over: the handoff is passed on.
    let racer = client
        .lock_with("leave", fair(Duration::from_secs(30)))
        .unwrap();
    let task = tokio::spawn({
        let racer = racer.clone();
        async move { racer.acquire(Wait::Forever).await }
    });
    until_in_line(&holder, 1).await;
    holder.release().await.unwrap();
    task.abort();
    if let Ok(Ok(_)) = task.await {
        // The handoff completed before the cancellation: it is the racer's
        // to release, like any acquisition.
        racer.release().await.unwrap();
    }
    let mut conn = redis.conn();
    let free = eventually(Duration::from_secs(5), || {
        // Either the racer got it and its cancellation released it, or it
        // was never handed over: both end with the lock free.
        !conn.exists::<_, bool>("rlock:{leave}").unwrap()
    })
    .await;
    assert!(free, "a lock handed to a cancelled waiter was stranded");
}

#[tokio::test]
async fn a_lost_handoff_message_is_recovered_by_the_waiters_own_check_and_grants_nothing_late() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    // The holder's lease bounds how long the waiter sleeps without news.
    let holder = client
        .lock_with("quiet", fair(Duration::from_secs(1)).auto_renew(false))
        .unwrap();
    holder.acquire(Wait::Once).await.unwrap();
    let other = Client::connect(&redis.url()).await.unwrap();
    let waiter = other
        .lock_with("quiet", fair(Duration::from_secs(30)))
        .unwrap();
    let owner = waiter.owner().to_owned();
    let waiting = tokio::spawn({
        let waiter = waiter.clone();
        async move { waiter.acquire(Wait::For(Duration::from_secs(20))).await }
    });
    until_in_line(&holder, 1).await;
    let fence = redis.hand_over_silently("quiet", &owner);
    let got = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(got.fencing_token, fence);
    assert_eq!(
        got.count, 1,
        "a handoff found by the waiter is not counted twice"
    );
    assert_eq!(waiter.release().await.unwrap(), 0);

    // Waiting again, the waiter hears that handoff's message after all (as
    // when it was only late): it must wait on for a grant of its own.
    let holder = client
        .lock_with("quiet", fair(Duration::from_secs(30)))
        .unwrap();
    holder.acquire(Wait::Once).await.unwrap();
    let waiting = tokio::spawn({
        let waiter = waiter.clone();
        async move { waiter.acquire(Wait::For(Duration::from_secs(20))).await }
    });
    until_in_line(&holder, 1).await;
    let channel = format!("rlock:{{quiet}}:w:{}", other.id());
    let heard: i64 = redis
        .conn()
        .publish(&channel, format!("handoff {fence} {owner}"))
        .unwrap();
    assert_eq!(heard, 1);
    holder.release().await.unwrap();
    let again = finished(waiting, Duration::from_secs(5)).await.unwrap();
    assert!(
        again.fencing_token > fence,
        "granted by the late message of {fence}: {again:?}"
    );
    assert!(waiter.owned().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fair_and_plain_users_of_one_name_never_break_mutual_exclusion() {
    let redis = RedisServer::start();
    let data = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let locks = (0..8)
        .map(|i| {
            let options = if i % 2 == 0 {
                fair(Duration::from_secs(30))
            } else {
                LockOptions::default()
            };
            client.lock_with("mixed", options).unwrap()
        })
        .collect();
    assert_eq!(contend(locks, 40, &data.url()).await, 8 * 40);
}

#[tokio::test]
async fn a_plain_newcomer_cannot_barge_past_the_line() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let holder = client
        .lock_with("barge", fair(Duration::from_millis(400)).auto_renew(false))
        .unwrap();
    holder.acquire(Wait::Once).await.unwrap();
    let queued = client
        .lock_with("barge", fair(Duration::from_secs(30)))
        .unwrap();
    let waiting = tokio::spawn({
        let queued = queued.clone();
        async move { queued.acquire(Wait::For(Duration::from_secs(10))).await }
    });
    until_in_line(&holder, 1).await;
    // The holder's lease runs out (no release, no handoff message): the lock
    // is free in Redis with a live waiter in line. A plain newcomer polls.
    let newcomer = client.lock("barge").unwrap();
    let mut conn = redis.conn();
    assert!(
        eventually(Duration::from_secs(3), || !conn
            .exists::<_, bool>("rlock:{barge}")
            .unwrap()
            || queued_holds(&mut conn))
        .await
    );
    let mut barged = false;
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(300) {
        if newcomer.try_acquire().await.unwrap().is_some() {
            barged = true;
            break;
        }
    }
    assert!(!barged, "a newcomer took the lock from a queued waiter");
    tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}

fn queued_holds(conn: &mut redis::Connection) -> bool {
    conn.hget::<_, _, Option<String>>("rlock:{barge}", "owner")
        .unwrap()
        .is_some()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_queued_waiters_of_one_client_send_nothing_while_idle() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let holder = client
        .lock_with("crowd", fair(Duration::from_secs(60)))
        .unwrap();
    holder.acquire(Wait::Once).await.unwrap();
    let waiters = Client::connect(&redis.url()).await.unwrap();
    let mut tasks = Vec::new();
    for _ in 0..1000 {
        let lock = waiters
            .lock_with("crowd", fair(Duration::from_secs(60)))
            .unwrap();
        tasks.push(tokio::spawn(async move {
            lock.acquire(Wait::For(Duration::from_secs(60))).await?;
            lock.release().await
        }));
    }
    until_in_line(&holder, 1000).await;
    let mut monitor = redis.monitor();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let sent = monitor.mark();
    assert!(
        sent.is_empty(),
        "idle waiters sent {} commands: {:?}",
        sent.len(),
        &sent[..sent.len().min(5)]
    );
    let waiter_channel = format!("rlock:{{crowd}}:w:{}", waiters.id());
    assert_eq!(
        redis.subscribers(&waiter_channel),
        1,
        "one subscription for the whole line"
    );
    // Hand the lock down the whole line: each waiter releases to the next.
    holder.release().await.unwrap();
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(30), t)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handoff_counts_only_once_the_replicas_have_it() {
    // No replica: nothing is ever acknowledged.
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let holder = client
        .lock_with("synced", fair(Duration::from_secs(30)))
        .unwrap();
    holder.acquire(Wait::Once).await.unwrap();
    let other = Client::connect(&redis.url()).await.unwrap();
    let waiter = other
        .lock_with(
            "synced",
            fair(Duration::from_secs(2)).sync_replicas(Some(1)),
        )
        .unwrap();
    let wait = tokio::spawn({
        let waiter = waiter.clone();
        async move { waiter.acquire(Wait::For(Duration::from_secs(3))).await }
    });
    until_in_line(&holder, 1).await;
    holder.release().await.unwrap();
    let err = finished(wait, Duration::from_secs(10)).await.unwrap_err();
    assert_eq!(err.category(), "timeout", "{err}");
    assert!(err.to_string().contains("replicas"), "{err}");
    assert_eq!(waiter.fencing_token(), None);
    assert!(
        !holder.locked().await.unwrap(),
        "the handoff was given back"
    );
    assert_eq!(waiting(&holder).await, 0);
}
