//! Redlock: a client on several independent masters takes each lock on a
//! majority, tolerates a minority of failed nodes, and reports the loss when
//! a majority forgets the lock.

use std::time::{Duration, Instant};

use redis::Commands;
use rlock_core::{Client, ClientOptions, LockOptions, LostReason, Wait};
use rlock_test_support::{
    contend, eventually, finished, worker_args, worker_process, Masters, RedisServer,
};

async fn client(servers: &Masters) -> Client {
    Client::connect_urls(&servers.urls(), ClientOptions::default())
        .await
        .unwrap()
}

fn held_on(servers: &[RedisServer], key: &str) -> usize {
    servers
        .iter()
        .filter(|s| s.is_running() && s.conn().exists::<_, bool>(key).unwrap())
        .count()
}

#[tokio::test]
async fn a_lock_is_taken_on_every_node_and_released_everywhere() {
    let nodes = Masters::start(5);
    let client = client(&nodes).await;
    assert!(client.is_redlock());
    let lock = client.lock("job").unwrap();
    let held = lock.acquire(Wait::Once).await.unwrap();
    // Acquisition returns once a majority granted (the requests still in
    // flight to the others may land or not).
    assert!(held_on(&nodes, "rlock:{job}") >= 3);
    let other = client.lock("job").unwrap();
    assert_eq!(other.try_acquire().await.unwrap(), None);
    assert!(lock.owned().await.unwrap());
    assert!(lock.locked().await.unwrap());
    lock.release().await.unwrap();
    assert_eq!(held_on(&nodes, "rlock:{job}"), 0);
    let next = other.acquire(Wait::Once).await.unwrap().fencing_token;
    assert!(
        next > held.fencing_token,
        "{next} after {}",
        held.fencing_token
    );
}

#[tokio::test]
async fn fair_mode_is_refused_over_independent_masters() {
    let nodes = Masters::start(3);
    let client = client(&nodes).await;
    let err = client
        .lock_with("line", LockOptions::default().fair(true))
        .unwrap_err();
    assert_eq!(err.category(), "bad input", "{err}");
    assert!(err.to_string().contains("Redlock"), "{err}");
    let err = client
        .lock_with("line", LockOptions::default().sync_replicas(Some(1)))
        .unwrap_err();
    assert_eq!(err.category(), "bad input", "{err}");
}

#[tokio::test]
async fn a_client_starts_with_a_minority_of_masters_down_but_not_with_a_majority() {
    let mut nodes = Masters::start(3);
    nodes[0].stop();
    let client = client(&nodes).await;
    let lock = client.lock("late").unwrap();
    lock.acquire(Wait::Once).await.unwrap();
    // A short wait is not stretched by the subscription to the dead master.
    let other = client.lock("late").unwrap();
    let start = Instant::now();
    let err = other
        .acquire(Wait::For(Duration::from_millis(300)))
        .await
        .unwrap_err();
    assert_eq!(err.category(), "timeout", "{err}");
    assert!(
        start.elapsed() < Duration::from_millis(900),
        "{:?}",
        start.elapsed()
    );
    nodes[1].stop();
    let err = Client::connect_urls(&nodes.urls(), ClientOptions::default())
        .await
        .unwrap_err();
    assert_eq!(err.category(), "connection", "{err}");
    assert!(err.to_string().contains("majority"), "{err}");
}

#[tokio::test]
async fn two_nodes_down_of_five_still_acquires() {
    let mut nodes = Masters::start(5);
    let client = client(&nodes).await;
    nodes[3].stop();
    nodes[4].stop();
    let lock = client.lock("minority-down").unwrap();
    lock.acquire(Wait::For(Duration::from_secs(5)))
        .await
        .unwrap();
    assert_eq!(held_on(&nodes, "rlock:{minority-down}"), 3);
    let rival = client.lock("minority-down").unwrap();
    assert_eq!(rival.try_acquire().await.unwrap(), None);
    lock.release().await.unwrap();
}

#[tokio::test]
async fn a_dead_master_fails_at_once_and_costs_no_operation_its_node_timeout() {
    let mut nodes = Masters::start(3);
    let client = client(&nodes).await;
    let warm = client.lock("warm").unwrap();
    warm.acquire(Wait::Once).await.unwrap();
    warm.release().await.unwrap();
    nodes[2].stop();
    // The node timeout is 200 ms: an operation that waited for the dead
    // master (its connection retrying) would take that long.
    for i in 0..5 {
        let lock = client.lock(&format!("dead-master-{i}")).unwrap();
        let start = Instant::now();
        lock.acquire(Wait::Once).await.unwrap();
        let acquired = start.elapsed();
        let start = Instant::now();
        lock.release().await.unwrap();
        let released = start.elapsed();
        assert!(
            acquired < Duration::from_millis(150),
            "acquire took {acquired:?}"
        );
        assert!(
            released < Duration::from_millis(150),
            "release took {released:?}"
        );
    }
    // A split vote (a rival holds one live master) is decided as soon as the
    // dead master's error comes, not at its node timeout.
    let mut rival = nodes[0].conn();
    let _: () = redis::cmd("HSET")
        .arg("rlock:{split}")
        .arg(&["owner", "rival:1", "count", "1", "fence", "1"])
        .query(&mut rival)
        .unwrap();
    let _: () = rival.pexpire("rlock:{split}", 1000).unwrap();
    let lock = client.lock("split").unwrap();
    let start = Instant::now();
    assert!(lock.try_acquire().await.unwrap().is_none());
    let refused = start.elapsed();
    assert!(
        refused < Duration::from_millis(150),
        "a split vote took {refused:?}"
    );
    assert_eq!(
        held_on(&nodes, "rlock:{split}"),
        1,
        "its one grant was given back"
    );
    // Waiting it out: each attempt takes the live master the rival does not
    // hold, falls short and gives it back (announcing a release), then backs
    // off 5–50 ms; woken by its own give-back it would retry every round trip.
    lock.acquire(Wait::For(Duration::from_secs(5)))
        .await
        .unwrap();
    // The slot's counter, which no other name of this test shares.
    let attempts: u64 = nodes[1].conn().get(&lock.keys().fence).unwrap();
    assert!(
        attempts < 100,
        "{attempts} attempts while the rival's 1 s grant lasted"
    );
    lock.release().await.unwrap();
}

#[tokio::test]
async fn a_release_that_a_majority_refuses_says_the_lock_was_not_held() {
    let nodes = Masters::start(3);
    let client = client(&nodes).await;
    let lock = client.lock("forgotten").unwrap();
    lock.acquire(Wait::Once).await.unwrap();
    // Two masters forget it (restarts without persistence, say): a rival
    // could take it there, so this holder no longer held it.
    for n in &nodes[..2] {
        let _: () = n.conn().del("rlock:{forgotten}").unwrap();
    }
    let err = lock.finish().await.unwrap_err();
    assert_eq!(err.category(), "lost", "{err}");
    assert_eq!(
        held_on(&nodes, "rlock:{forgotten}"),
        0,
        "released where it stood"
    );
}

#[tokio::test]
async fn with_a_master_down_a_waiter_sleeps_until_the_release_instead_of_polling() {
    let mut nodes = Masters::start(3);
    let client = client(&nodes).await;
    nodes[2].stop();
    let holder = client.lock("held-long").unwrap();
    holder.acquire(Wait::Once).await.unwrap();
    let waiter = client.lock("held-long").unwrap();
    let waiting = tokio::spawn(async move {
        let start = Instant::now();
        waiter.acquire(Wait::For(Duration::from_secs(20))).await?;
        waiter.release().await?;
        Ok::<_, rlock_core::Error>(start.elapsed())
    });
    // Once it is waiting, a quiet second on a live master: the dead one's
    // errors do not turn the wait into retries every few milliseconds.
    assert!(
        eventually(Duration::from_secs(5), || nodes[0]
            .subscribers("rlock:{held-long}:released")
            > 0)
        .await
    );
    let before = nodes[0].calls("evalsha");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let attempts = nodes[0].calls("evalsha") - before;
    assert!(attempts <= 1, "{attempts} attempts in a second of waiting");
    holder.release().await.unwrap();
    let waited = finished(waiting, Duration::from_secs(5)).await.unwrap();
    assert!(
        waited < Duration::from_secs(5),
        "woken by the release: {waited:?}"
    );
}

#[tokio::test]
async fn three_nodes_down_of_five_is_a_timeout_within_the_wait_with_the_node_errors() {
    let mut nodes = Masters::start(5);
    let client = client(&nodes).await;
    for n in &mut nodes[2..] {
        n.stop();
    }
    let lock = client.lock("majority-down").unwrap();
    let start = Instant::now();
    let err = lock
        .acquire(Wait::For(Duration::from_millis(800)))
        .await
        .unwrap_err();
    let waited = start.elapsed();
    assert_eq!(err.category(), "timeout", "{err}");
    assert!(err.to_string().contains("quorum"), "{err}");
    assert!(waited < Duration::from_secs(2), "{waited:?}");
    assert_eq!(
        held_on(&nodes, "rlock:{majority-down}"),
        0,
        "the minority it got was given back"
    );
}

#[tokio::test]
async fn a_node_stalled_past_the_node_timeout_does_not_stall_acquisition() {
    let nodes = Masters::start(5);
    let options = ClientOptions::default().node_timeout(Duration::from_millis(150));
    let client = Client::connect_urls(&nodes.urls(), options).await.unwrap();
    // Warm the scripts everywhere first so the measured call is one round trip.
    let warm = client.lock("warm").unwrap();
    warm.acquire(Wait::Once).await.unwrap();
    warm.release().await.unwrap();
    let sleeper = nodes[0].stall(2.0);
    let start = Instant::now();
    let lock = client.lock("slow-node").unwrap();
    lock.acquire(Wait::For(Duration::from_secs(5)))
        .await
        .unwrap();
    assert!(
        start.elapsed() < Duration::from_millis(1000),
        "{:?}",
        start.elapsed()
    );
    sleeper.join().unwrap();
}

#[tokio::test]
async fn nodes_restarted_without_persistence_while_held_lose_the_lock_once_a_majority_forgot_it() {
    let mut nodes = Masters::start(5);
    let client = client(&nodes).await;
    let opts = LockOptions::default().ttl(Duration::from_millis(900));
    let lock = client.lock_with("amnesia", opts).unwrap();
    lock.acquire(Wait::Once).await.unwrap();
    // The masters that hold it (the acquisition returned at a majority: the
    // requests to slower ones may have been dropped unsent).
    let holding: Vec<usize> = (0..5)
        .filter(|&i| {
            nodes[i]
                .conn()
                .exists::<_, bool>("rlock:{amnesia}")
                .unwrap()
        })
        .collect();
    assert!(holding.len() >= 3, "held on {holding:?}");
    // One of them forgets: while a majority still holds it, renewals keep
    // it and nobody else gets in.
    let mut forgot = 0;
    let rival_client = Client::connect_urls(&nodes.urls(), ClientOptions::default())
        .await
        .unwrap();
    let rival = rival_client.lock("amnesia").unwrap();
    if holding.len() > 3 {
        nodes[holding[0]].restart();
        forgot = 1;
        assert_eq!(rival.try_acquire().await.unwrap(), None);
        assert_eq!(lock.lost(), None);
    }
    // More forget, until a majority no longer knows the lock. The holder is
    // told by its next renewal, and a rival can take it.
    while holding.len() - forgot >= 3 {
        nodes[holding[forgot]].restart();
        forgot += 1;
    }
    let lost = tokio::time::timeout(Duration::from_secs(3), lock.lost_signal())
        .await
        .unwrap();
    assert_eq!(lost, Some(LostReason::Expired));
    rival
        .acquire(Wait::For(Duration::from_secs(3)))
        .await
        .unwrap();
}

#[test]
fn eight_holders_in_two_processes_keep_a_non_atomic_counter_exact() {
    let nodes = Masters::start(3);
    let data = RedisServer::start();
    let mut args = vec![data.url()];
    args.extend(nodes.urls());
    let mut a = worker_process("counter_worker", &args);
    let mut b = worker_process("counter_worker", &args);
    assert!(a.wait().unwrap().success());
    assert!(b.wait().unwrap().success());
    let n: i64 = data.conn().get("counted").unwrap();
    assert_eq!(n, 2 * 4 * 50);
}

/// Four tasks each take the Redlock lock 50 times and increment a counter
/// with GET then SET: only mutual exclusion keeps it exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the worker process of eight_holders_in_two_processes_keep_a_non_atomic_counter_exact, not a test of its own"]
async fn counter_worker() {
    let args = worker_args();
    let (data, lock_urls) = args.split_first().unwrap();
    let client = Client::connect_urls(lock_urls, ClientOptions::default())
        .await
        .unwrap();
    let locks = (0..4).map(|_| client.lock("counted").unwrap()).collect();
    contend(locks, 50, data).await;
}

#[tokio::test]
async fn a_release_answers_the_count_a_majority_still_has() {
    let nodes = Masters::start(3);
    let client = client(&nodes).await;
    let lock = client.lock("stale").unwrap();
    lock.acquire(Wait::Once).await.unwrap();
    lock.acquire(Wait::Once).await.unwrap();
    // One master holds a count the others do not (a stale write).
    let _: () = nodes[0].conn().hset("rlock:{stale}", "count", 5).unwrap();
    assert_eq!(lock.release().await.unwrap(), 1);
    assert_eq!(lock.release().await.unwrap(), 0);
    // Released on a majority: another client takes it at once.
    let other = client.lock("stale").unwrap();
    assert!(other.try_acquire().await.unwrap().is_some());
}

/// Each master keeps its own fence counter, and an acquisition reports the
/// largest token of the masters that answered: a re-entry answered by
/// another quorum than the first acquisition may carry another token. It is
/// still a re-entry (counted above 1), never a loss or a give-back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_re_entry_answered_by_another_quorum_is_no_loss() {
    let nodes = Masters::start(3);
    let options = ClientOptions::default().node_timeout(Duration::from_millis(150));
    let client = Client::connect_urls(&nodes.urls(), options).await.unwrap();
    let lock = client
        .lock_with(
            "diverged",
            LockOptions::default().ttl(Duration::from_secs(30)),
        )
        .unwrap();
    let outer = lock.acquire(Wait::Once).await.unwrap();
    // Every master holds it, master 2 under a token of its own, its counter
    // being ahead (as when it applied the acquisition after the quorum
    // answered). Written here: the acquisition returned at a majority, and
    // a dropped request to a slower master may never have been sent.
    for (node, fence) in [(0, 0), (1, 0), (2, 100)] {
        let _: () = redis::pipe()
            .hset_multiple(
                "rlock:{diverged}",
                &[
                    ("owner", lock.owner().to_owned()),
                    ("count", "1".to_owned()),
                    ("fence", (outer.fencing_token + fence).to_string()),
                ],
            )
            .pexpire("rlock:{diverged}", 30_000)
            .query(&mut nodes[node].conn())
            .unwrap();
    }
    // ... the re-entry by masters 1 and 2, whose token is master 2's.
    let stall = nodes[0].stall(0.6);
    let nested = lock.acquire(Wait::Once).await;
    stall.join().unwrap();
    let nested = nested.expect("a re-entry failed");
    assert_eq!(nested.count, 2);
    assert_eq!(lock.lost(), None);
    assert!(outer.fencing_token > 0);
    assert_eq!(
        held_on(&nodes, "rlock:{diverged}"),
        3,
        "the holding was given back"
    );
    assert_eq!(lock.release().await.unwrap(), 1);
    assert_eq!(lock.release().await.unwrap(), 0);
}

#[tokio::test]
async fn a_re_entry_over_masters_that_forgot_the_lock_is_a_loss_not_a_re_entry() {
    let nodes = Masters::start(3);
    let options = ClientOptions::default().node_timeout(Duration::from_millis(150));
    let holding = Client::connect_urls(&nodes.urls(), options).await.unwrap();
    let lock = holding
        .lock_with(
            "ledger",
            LockOptions::default().ttl(Duration::from_secs(30)),
        )
        .unwrap();
    lock.acquire(Wait::Once).await.unwrap();
    // Two masters lose the key (a restart without persistence); a rival
    // takes the lock on them, works, and releases.
    for node in &nodes[1..] {
        let _: () = redis::cmd("FLUSHALL").query(&mut node.conn()).unwrap();
    }
    let rival_client = client(&nodes).await;
    let rival = rival_client.lock("ledger").unwrap();
    rival.acquire(Wait::Once).await.unwrap();
    rival.release().await.unwrap();
    // The holder re-enters (a nested scope). Master 0, which kept the
    // holding, answers with one of the others before the last one does.
    let stall = nodes[2].stall(0.5);
    let nested = lock.acquire(Wait::Once).await;
    stall.join().unwrap();
    assert!(
        matches!(nested, Err(rlock_core::Error::Lost { .. })),
        "a re-entry over a rival's holding: {nested:?}"
    );
    assert_eq!(lock.lost(), Some(LostReason::Expired));
    // What the masters granted afresh was given back: the rival gets in.
    assert!(rival
        .acquire(Wait::For(Duration::from_secs(3)))
        .await
        .is_ok());
}

#[tokio::test]
async fn a_waiter_sleeps_while_the_holder_holds_a_majority_whatever_a_master_come_back_empty_grants(
) {
    let mut nodes = Masters::start(3);
    let holding = client(&nodes).await;
    let waiting = client(&nodes).await;
    nodes[2].stop();
    let holder = holding.lock("held-on-two").unwrap();
    holder.acquire(Wait::Once).await.unwrap();
    // The third master comes back empty: it grants the lock to whoever asks.
    nodes[2].restart();
    let waiter = waiting.lock("held-on-two").unwrap();
    let waiting_task = tokio::spawn(async move {
        let start = Instant::now();
        waiter.acquire(Wait::For(Duration::from_secs(20))).await?;
        waiter.release().await?;
        Ok::<_, rlock_core::Error>(start.elapsed())
    });
    assert!(
        eventually(Duration::from_secs(10), || nodes
            .iter()
            .all(|n| n.subscribers("rlock:{held-on-two}:released") > 0))
        .await,
        "the waiter never listened on every master"
    );
    // A quiet two seconds on the master that grants it: the waiter takes
    // it, gives it back (two script calls), and sleeps until the release;
    // its give-back's message wakes it only after a pause that doubles
    // (100 ms, 200 ms, ...), so a handful of tries, where it tried every
    // 5–50 ms (some 140 calls) when it took a minority's grant for a split
    // vote.
    let before = nodes[2].calls("evalsha");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let calls = nodes[2].calls("evalsha") - before;
    assert!(
        calls <= 10,
        "{calls} script calls in two seconds of waiting"
    );
    holder.release().await.unwrap();
    let waited = finished(waiting_task, Duration::from_secs(10))
        .await
        .unwrap();
    assert!(waited < Duration::from_secs(10), "{waited:?}");
}

/// Redlock, one master lost the key (restart without
/// persistence): every waiter's attempt is granted on that master and
/// finds the lock busy on the majority, gives the grant back (published as
/// `given back <its client id>`) and sleeps "until the release". A waiter of
/// another client hears that give-back, wakes, attempts, gives back in its
/// turn, which wakes the first: two clients wake each other for the whole
/// holding, with no back-off at all.
#[tokio::test]
async fn waiters_of_two_clients_do_not_wake_each_other_in_a_loop_on_a_lock_a_majority_holds() {
    let nodes = Masters::start(3);
    let holding = client(&nodes).await;
    let holder = holding.lock("ping").unwrap();
    holder.acquire(Wait::Once).await.unwrap();
    // Held on a bare majority: the acquisition returned at a majority (the
    // request to the third master may never have been sent), or a master
    // forgot it (a restart without persistence).
    tokio::time::sleep(Duration::from_millis(200)).await;
    let holding: Vec<usize> = (0..3)
        .filter(|&i| nodes[i].conn().exists::<_, bool>("rlock:{ping}").unwrap())
        .collect();
    assert!(holding.len() >= 2, "held on {holding:?}");
    if holding.len() == 3 {
        let _: () = nodes[2].conn().del("rlock:{ping}").unwrap();
    }
    let free = (0..3)
        .find(|&i| !nodes[i].conn().exists::<_, bool>("rlock:{ping}").unwrap())
        .unwrap();
    let (a, b) = (client(&nodes).await, client(&nodes).await);
    let mut waits = Vec::new();
    for c in [&a, &b] {
        let lock = c.lock("ping").unwrap();
        waits.push(tokio::spawn(async move {
            lock.acquire(Wait::For(Duration::from_secs(8))).await
        }));
    }
    assert!(
        eventually(Duration::from_secs(5), || nodes[free]
            .subscribers("rlock:{ping}:released")
            >= 2)
        .await
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = nodes[free].calls("evalsha");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let calls = nodes[free].calls("evalsha") - before;
    for w in &waits {
        w.abort();
    }
    assert!(
        calls < 40,
        "{calls} script calls on one master in 2 s of two waiters sleeping until a release"
    );
}

/// A waiter sleeps on a majority it found busy, one of whose
/// masters was busy only with another attempt of its own client (a single
/// attempt, or a wait that then gave up) that fell short. That attempt's
/// give-back frees the master, and with the waiter's own grant given back a
/// majority is free: but the message is `given back <this client>`, which
/// the waiter ignores, and it sleeps until the shortest lease it saw.
/// (The other attempt's grant on master 1 is written here; the real
/// interleaving: on master 1 the other attempt's script runs first, on
/// master 2 the waiter's.)
#[tokio::test]
async fn a_give_back_of_the_same_client_that_frees_a_majority_wakes_its_sleeping_waiter() {
    let nodes = Masters::start(3);
    let c = client(&nodes).await;
    let waiter = c.lock("own").unwrap();
    let other = c.lock("own").unwrap();
    let grant = |node: &RedisServer, owner: &str| {
        let _: () = redis::pipe()
            .hset_multiple(
                "rlock:{own}",
                &[("owner", owner), ("count", "1"), ("fence", "7")],
            )
            .pexpire("rlock:{own}", 20_000)
            .query(&mut node.conn())
            .unwrap();
    };
    // Master 0: a holder that crashed (its grants elsewhere are gone).
    grant(&nodes[0], "ghost:1");
    // Master 1: the grant of another attempt of this client, in flight.
    grant(&nodes[1], other.owner());
    let wait = {
        let waiter = waiter.clone();
        tokio::spawn(async move { waiter.acquire(Wait::For(Duration::from_secs(10))).await })
    };
    assert!(
        eventually(Duration::from_secs(5), || nodes[1]
            .subscribers("rlock:{own}:released")
            >= 1)
        .await
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    // That attempt fell short (master 2 was granted to the waiter): it gives
    // its grant on master 1 back, as release.lua does.
    let _: () = nodes[1].conn().del("rlock:{own}").unwrap();
    let _: () = nodes[1]
        .conn()
        .publish("rlock:{own}:released", format!("given back {}", c.id()))
        .unwrap();
    let freed = Instant::now();
    finished(wait, Duration::from_secs(15)).await.unwrap();
    assert!(
        freed.elapsed() < Duration::from_secs(2),
        "slept {:?} with masters 1 and 2 free",
        freed.elapsed()
    );
}

#[tokio::test]
async fn a_run_once_job_without_a_quorum_is_an_error_not_a_skip() {
    let mut nodes = Masters::start(3);
    let client = client(&nodes).await;
    nodes[1].stop();
    nodes[2].stop();
    let started = client
        .start_job("nightly", rlock_core::JobOptions::default())
        .await;
    assert!(
        matches!(
            started,
            Err(rlock_core::Error::Timeout { cause: Some(_), .. })
        ),
        "{started:?}"
    );
}
