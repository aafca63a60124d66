//! Redis Cluster: locks route by slot (the `{NAME}` tag keeps each lock's keys
//! together), release messages travel by sharded pub/sub, and a master
//! failover never leaves a silent second holder.

use std::time::Duration;

use rlock_core::{Client, ClientOptions, LockOptions, Wait};
use rlock_test_support::{contend, eventually, finished, RedisCluster, RedisServer};

async fn client(cluster: &RedisCluster) -> Client {
    Client::connect_urls(&cluster.seed_urls(), ClientOptions::default().cluster(true))
        .await
        .unwrap()
}

#[tokio::test]
async fn locks_on_names_over_every_master_work_without_crossslot_errors() {
    let cluster = RedisCluster::start(3, 0);
    let client = client(&cluster).await;
    assert!(!client.is_redlock());
    let mut masters = std::collections::HashSet::new();
    for i in 0..150 {
        let name = format!("item:{i}");
        masters.insert(cluster.master_of(&format!("rlock:{{{name}}}")));
        let lock = client.lock(&name).unwrap();
        // The fence counter lives in the lock's slot, as the node hashes keys.
        let (keys, node) = (lock.keys(), &cluster.nodes[0]);
        assert_eq!(node.keyslot(&keys.fence), node.keyslot(&keys.lock));
        lock.acquire(Wait::Once).await.unwrap();
        lock.extend(None).await.unwrap();
        let state = lock.state().await.unwrap();
        assert_eq!(state.owner.as_deref(), Some(lock.owner()));
        assert_eq!(lock.release().await.unwrap(), 0);
    }
    assert_eq!(masters.len(), 3, "the names covered every master");
}

#[tokio::test]
async fn a_waiter_is_woken_by_the_sharded_release_message() {
    let cluster = RedisCluster::start(3, 0);
    let holder_client = client(&cluster).await;
    let waiter_client = client(&cluster).await;
    let holder = holder_client
        .lock_with("hot", LockOptions::default().ttl(Duration::from_secs(30)))
        .unwrap();
    holder.acquire(Wait::Once).await.unwrap();
    let waiter = waiter_client.lock("hot").unwrap();
    let waiting =
        tokio::spawn(async move { waiter.acquire(Wait::For(Duration::from_secs(20))).await });
    let node = &cluster.nodes[cluster.master_of("rlock:{hot}")];
    assert!(
        eventually(Duration::from_secs(5), || {
            let (_, n): (String, i64) = redis::cmd("PUBSUB")
                .arg("SHARDNUMSUB")
                .arg("rlock:{hot}:released")
                .query(&mut node.conn())
                .unwrap();
            n == 1
        })
        .await,
        "the waiter subscribed on the slot's node"
    );
    holder.release().await.unwrap();
    // The holder's lease had ~30 s left: only the message explains this.
    let got = finished(waiting, Duration::from_secs(5)).await;
    assert!(got.is_ok(), "{got:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_tasks_keep_a_non_atomic_counter_exact() {
    let cluster = RedisCluster::start(3, 0);
    let data = RedisServer::start();
    let client = client(&cluster).await;
    let locks = (0..8).map(|_| client.lock("counter").unwrap()).collect();
    assert_eq!(contend(locks, 50, &data.url()).await, 8 * 50);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_failover_leaves_every_holding_held_or_reported_lost() {
    let mut cluster = RedisCluster::start(3, 1);
    let holder = client(&cluster).await;
    let opts = LockOptions::default().ttl(Duration::from_secs(3));
    let mut locks = Vec::new();
    for i in 0..30 {
        let lock = holder.lock_with(&format!("fo:{i}"), opts.clone()).unwrap();
        lock.acquire(Wait::Once).await.unwrap();
        locks.push(lock);
    }
    let victim_port = cluster.nodes[cluster.master_of("rlock:{fo:0}")].port;
    let on_victim: Vec<bool> = (0..30)
        .map(|i| cluster.nodes[cluster.master_of(&format!("rlock:{{fo:{i}}}"))].port == victim_port)
        .collect();
    cluster.fail_over("rlock:{fo:0}");
    // Let the watchdog meet the new topology: a few renewal periods.
    let rival_client = client(&cluster).await;
    let mut on_failed_master = 0;
    let mut lost_elsewhere = 0;
    let mut lost = 0;
    for (i, lock) in locks.iter().enumerate() {
        let name = format!("fo:{i}");
        // Either the holder still holds it, or it was told it lost it.
        let settled = eventually(Duration::from_secs(5), || {
            lock.lost().is_some() || { futures_block(lock.owned()).unwrap_or(false) }
        })
        .await;
        assert!(settled, "{name}: neither held nor reported lost");
        let rival = rival_client.lock(&name).unwrap();
        if retrying(|| rival.try_acquire()).await.is_some() {
            assert!(
                lock.lost().is_some(),
                "{name}: a second holder while the first was not told"
            );
            lost += 1;
            rival.release().await.unwrap();
        }
        on_failed_master += usize::from(on_victim[i]);
        // Locks on healthy masters normally keep renewing; on a loaded
        // machine a failover can still cost them their lease, which is
        // then reported like any other loss (checked above).
        lost_elsewhere += usize::from(!on_victim[i] && lock.lost().is_some());
    }
    // The client keeps working after the failover.
    let fresh = holder.lock("after-failover").unwrap();
    retrying(|| fresh.acquire(Wait::For(Duration::from_secs(5)))).await;
    fresh.release().await.unwrap();
    eprintln!(
        "failover: {lost} locks taken over after being reported lost; {on_failed_master} of 30 were on the failed master; {lost_elsewhere} lost elsewhere"
    );
}

/// Retries an operation that fails with connection errors while the cluster
/// settles after a failover (a client sees the new topology within seconds).
async fn retrying<T, F, Fut>(mut op: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = rlock_core::Result<T>>,
{
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        match op().await {
            Ok(v) => return v,
            Err(e) if e.category() == "connection" && std::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            Err(e) => panic!("{e}"),
        }
    }
}

/// Runs a future to completion from a synchronous check.
fn futures_block<F: std::future::Future>(f: F) -> F::Output {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(f))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fair_waiters_are_handed_the_lock_in_order_through_sharded_messages() {
    let cluster = RedisCluster::start(3, 0);
    let holder_client = client(&cluster).await;
    let waiter_client = client(&cluster).await;
    let fair = LockOptions::default()
        .ttl(Duration::from_secs(30))
        .fair(true);
    let holder = holder_client.lock_with("line", fair.clone()).unwrap();
    holder.acquire(Wait::Once).await.unwrap();
    let mut tasks = Vec::new();
    for i in 0..3 {
        let lock = waiter_client.lock_with("line", fair.clone()).unwrap();
        tasks.push(tokio::spawn(async move {
            let held = lock
                .acquire(Wait::For(Duration::from_secs(20)))
                .await
                .unwrap();
            lock.release().await.unwrap();
            (held.fencing_token, i)
        }));
        // Queue them one after the other: arrival order is the test's order.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while holder.state().await.unwrap().waiting != i + 1 {
            assert!(
                std::time::Instant::now() < deadline,
                "waiter {i} never queued"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    // The lease had ~30 s left: only the handoff messages explain this pace.
    let start = std::time::Instant::now();
    holder.release().await.unwrap();
    let mut got = Vec::new();
    for t in tasks {
        got.push(
            tokio::time::timeout(Duration::from_secs(5), t)
                .await
                .unwrap()
                .unwrap(),
        );
    }
    assert!(start.elapsed() < Duration::from_secs(5));
    got.sort();
    assert_eq!(
        got.iter().map(|(_, i)| *i).collect::<Vec<_>>(),
        vec![0, 1, 2]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_write_locks_and_semaphores_hand_over_through_sharded_messages() {
    let cluster = RedisCluster::start(3, 0);
    let holding = client(&cluster).await;
    let waiting = client(&cluster).await;
    let options = LockOptions::default().ttl(Duration::from_secs(30));
    let mut masters = std::collections::HashSet::new();
    for i in 0..6 {
        let name = format!("shared:{i}");
        masters.insert(cluster.master_of(&format!("rlock:{{{name}}}")));
        let writer = holding.rw_lock(&name, options.clone()).unwrap();
        writer.write().acquire(Wait::Once).await.unwrap();
        let reader = waiting.rw_lock(&name, options.clone()).unwrap();
        let read = tokio::spawn(async move {
            reader
                .read()
                .acquire(Wait::For(Duration::from_secs(20)))
                .await
        });
        let sem = holding.semaphore(&name, 1, options.clone()).unwrap();
        sem.acquire(1, Wait::Once).await.unwrap();
        let other = waiting.semaphore(&name, 1, options.clone()).unwrap();
        let permit =
            tokio::spawn(async move { other.acquire(1, Wait::For(Duration::from_secs(20))).await });
        assert!(
            eventually(Duration::from_secs(5), || {
                futures_block(async {
                    writer.state().await.unwrap().waiting == 1
                        && sem.state().await.unwrap().waiting == 1
                })
            })
            .await
        );
        writer.write().release().await.unwrap();
        sem.release().await.unwrap();
        // Both leases had ~30 s left: only the handoffs explain this.
        assert!(finished(read, Duration::from_secs(5)).await.is_ok());
        assert!(finished(permit, Duration::from_secs(5)).await.is_ok());
    }
    assert!(masters.len() >= 2, "the names covered several masters");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cached_waiters_on_another_client_get_the_value_by_the_sharded_message() {
    let cluster = RedisCluster::start(3, 0);
    let rebuilder = client(&cluster).await;
    let options = rlock_core::CacheOptions::new(Duration::from_secs(60));
    let cache = rebuilder.cache("catalog:7", options.clone()).unwrap();
    let rlock_core::Read::Load(rebuild) = cache.read().await.unwrap() else {
        panic!("a cold entry is this caller's to load");
    };
    let waiter = client(&cluster).await;
    // Well inside the rebuild lock's 30 s lease: only the message brings
    // the value in time.
    let waiting = tokio::spawn(async move {
        waiter
            .cached(
                "catalog:7",
                options.timeout(Some(Duration::from_secs(5))),
                || async { Ok::<_, String>(Some(b"second load".to_vec())) },
            )
            .await
    });
    let channel = "rlock:{catalog:7}:cached:news";
    let master = &cluster.nodes[cluster.master_of(channel)];
    let subscribed = eventually(Duration::from_secs(10), || {
        let subscribed: Vec<(String, i64)> = redis::cmd("PUBSUB")
            .arg("SHARDNUMSUB")
            .arg(channel)
            .query(&mut master.conn())
            .unwrap();
        subscribed[0].1 == 1
    })
    .await;
    assert!(
        subscribed,
        "the waiter never subscribed to the entry's channel"
    );
    assert_eq!(
        rebuild.store(Some(b"first load"), "bytes").await.unwrap(),
        rlock_core::Stored::Written
    );
    let value = finished(waiting, Duration::from_secs(5)).await.unwrap();
    assert_eq!(value, Some(b"first load".to_vec()));
    assert!(rebuilder.invalidate("catalog:7").await.unwrap());
}

/// Subscribers of a sharded channel on one node.
fn shard_subscribers(node: &RedisServer, channel: &str) -> i64 {
    let (_, n): (String, i64) = redis::cmd("PUBSUB")
        .arg("SHARDNUMSUB")
        .arg(channel)
        .query(&mut node.conn())
        .unwrap_or_default();
    n
}

/// Two rounds of a holder releasing to a waiter of another client, the
/// first after `disturb` moved the lock's slot (or its master) while the
/// waiter waited, the second with no further move: each waiter hears its
/// release at once, though the holder's lease had 30 s to run.
async fn waiters_hear_releases_after(
    cluster: &RedisCluster,
    name: &str,
    fair: bool,
    disturb: impl FnOnce(&RedisCluster),
) {
    let holder_client = client(cluster).await;
    let waiter_client = client(cluster).await;
    let options = LockOptions::default()
        .ttl(Duration::from_secs(30))
        .fair(fair);
    let holder = holder_client.lock_with(name, options.clone()).unwrap();
    let waiter = waiter_client.lock_with(name, options).unwrap();
    // A waiter stands in line (a fair one at once, the other after
    // `queue_after`) and hears its handoff on its client's waiter channel.
    let channel = waiter.keys().waiter_channel(waiter_client.id());
    let (lock_key, line_key) = (waiter.keys().lock.clone(), waiter.keys().queue.clone());
    let owner = waiter.owner().to_owned();
    // Subscribed on a node of the slot's shard (its master, or a replica:
    // sharded messages reach every node of the shard; a node that does not
    // serve the slot drops its subscriptions).
    let listened = |cluster: &RedisCluster| {
        let node = &cluster.nodes[cluster.master_of(&lock_key)];
        let line: Vec<String> = redis::cmd("LRANGE")
            .arg(&line_key)
            .arg(0)
            .arg(-1)
            .query(&mut node.conn())
            .unwrap_or_default();
        line.contains(&owner)
            && cluster
                .nodes
                .iter()
                .any(|n| n.is_running() && shard_subscribers(n, &channel) > 0)
    };
    let mut disturb = Some(disturb);
    for round in 1..=2 {
        holder.acquire(Wait::Once).await.unwrap();
        let waiting = {
            let waiter = waiter.clone();
            tokio::spawn(async move { waiter.acquire(Wait::For(Duration::from_secs(25))).await })
        };
        assert!(
            eventually(Duration::from_secs(10), || listened(cluster)).await,
            "round {round}: the waiter never subscribed"
        );
        if let Some(disturb) = disturb.take() {
            disturb(cluster);
            // Counted by the slot's master, as the scripts count a waiter
            // in line alive: a subscription left on the old master, now a
            // replica, hears messages but not its handoff.
            let counted = |cluster: &RedisCluster| {
                let master = &cluster.nodes[cluster.master_of(&lock_key)];
                listened(cluster) && shard_subscribers(master, &channel) > 0
            };
            assert!(
                eventually(Duration::from_secs(10), || counted(cluster)).await,
                "the waiter is not subscribed where the slot now lives"
            );
        }
        let released = std::time::Instant::now();
        holder.release().await.unwrap();
        finished(waiting, Duration::from_secs(25)).await.unwrap();
        let heard = released.elapsed();
        assert!(
            heard < Duration::from_secs(3),
            "round {round}: the waiter got the lock {heard:?} after the release"
        );
        waiter.release().await.unwrap();
    }
}

/// While its slot is half moved (IMPORTING on one master, MIGRATING on the
/// other, the lock's key not yet migrated), a holding keeps being renewed:
/// Redis refuses a script naming a missing key beside an existing one there
/// (TRYAGAIN), so the renewal names the lock alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holding_is_renewed_while_its_slot_is_being_moved() {
    let cluster = RedisCluster::start(3, 0);
    let client = client(&cluster).await;
    let lease = Duration::from_millis(1500);
    let lock = client
        .lock_with("renewed", LockOptions::default().ttl(lease))
        .unwrap();
    let held = lock.acquire(Wait::Once).await.unwrap();
    let key = lock.keys().lock.clone();
    let from = cluster.master_of(&key);
    let moving = cluster.start_migration(&key, (from + 1) % 3);
    // Four leases long: a renewal refused for the move would have ended it.
    let started = std::time::Instant::now();
    while started.elapsed() < lease * 4 {
        assert_eq!(
            lock.lost(),
            None,
            "lost after {:?} of the move",
            started.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let left: i64 = redis::cmd("PTTL")
        .arg(&key)
        .query(&mut cluster.nodes[from].conn())
        .unwrap();
    assert!(
        left > 0,
        "the lock's key is still on its first master, renewed"
    );
    cluster.finish_migration(moving);
    assert_eq!(lock.lost(), None);
    assert_eq!(lock.release().await.unwrap(), 0);
    assert!(held.fencing_token > 0);
}

#[tokio::test]
async fn a_waiter_hears_the_release_after_its_slot_moved_to_another_master() {
    let cluster = RedisCluster::start(3, 0);
    waiters_hear_releases_after(&cluster, "moving", false, |cluster| {
        let from = cluster.master_of("rlock:{moving}");
        cluster.migrate_slot("rlock:{moving}", (from + 1) % 3);
    })
    .await;
}

#[tokio::test]
async fn a_waiter_in_line_hears_its_handoff_after_its_slot_moved_to_another_master() {
    let cluster = RedisCluster::start(3, 0);
    waiters_hear_releases_after(&cluster, "moving", true, |cluster| {
        let from = cluster.master_of("rlock:{moving}");
        cluster.migrate_slot("rlock:{moving}", (from + 1) % 3);
    })
    .await;
}

#[tokio::test]
async fn a_waiter_hears_the_release_after_its_master_failed_over_to_a_replica() {
    let cluster = RedisCluster::start(3, 1);
    waiters_hear_releases_after(&cluster, "promoted", false, |cluster| {
        cluster.fail_over_gracefully("rlock:{promoted}");
    })
    .await;
}

#[tokio::test]
async fn a_release_right_after_a_slot_move_reaches_a_waiter_in_line() {
    let cluster = RedisCluster::start(3, 0);
    let holder_client = client(&cluster).await;
    let waiter_client = client(&cluster).await;
    let options = LockOptions::default()
        .ttl(Duration::from_secs(30))
        .fair(true);
    let holder = holder_client.lock_with("moved", options.clone()).unwrap();
    let waiter = waiter_client.lock_with("moved", options).unwrap();
    holder.acquire(Wait::Once).await.unwrap();
    let waiting = {
        let waiter = waiter.clone();
        tokio::spawn(async move { waiter.acquire(Wait::For(Duration::from_secs(25))).await })
    };
    let (lock_key, line_key) = (waiter.keys().lock.clone(), waiter.keys().queue.clone());
    let in_line = eventually(Duration::from_secs(10), || {
        let node = &cluster.nodes[cluster.master_of(&lock_key)];
        redis::cmd("LLEN")
            .arg(&line_key)
            .query::<i64>(&mut node.conn())
            .unwrap_or(0)
            == 1
    })
    .await;
    assert!(in_line, "the waiter never stood in line");
    let from = cluster.master_of(&lock_key);
    cluster.migrate_slot(&lock_key, (from + 1) % 3);
    // At once: the waiter's subscription may not stand on the new master
    // yet, so the release may find its place in line dead.
    let released = std::time::Instant::now();
    holder.release().await.unwrap();
    finished(waiting, Duration::from_secs(25)).await.unwrap();
    assert!(
        released.elapsed() < Duration::from_secs(3),
        "the waiter got the lock {:?} after the release",
        released.elapsed()
    );
}

#[tokio::test]
async fn waiters_hear_releases_right_after_each_of_several_failovers() {
    let cluster = RedisCluster::start(3, 1);
    let holder_client = client(&cluster).await;
    let waiter_client = client(&cluster).await;
    let options = LockOptions::default().ttl(Duration::from_secs(30));
    let holder = holder_client
        .lock_with("switched", options.clone())
        .unwrap();
    let waiter = waiter_client.lock_with("switched", options).unwrap();
    let (lock_key, line_key) = (waiter.keys().lock.clone(), waiter.keys().queue.clone());
    for round in 1..=4 {
        holder.acquire(Wait::Once).await.unwrap();
        let waiting = {
            let waiter = waiter.clone();
            tokio::spawn(async move { waiter.acquire(Wait::For(Duration::from_secs(25))).await })
        };
        let in_line = eventually(Duration::from_secs(10), || {
            let node = &cluster.nodes[cluster.master_of(&lock_key)];
            redis::cmd("LLEN")
                .arg(&line_key)
                .query::<i64>(&mut node.conn())
                .unwrap_or(0)
                == 1
        })
        .await;
        assert!(in_line, "round {round}: the waiter never stood in line");
        cluster.fail_over_gracefully(&lock_key);
        // Released as soon as the failover is done: wherever the waiter's
        // subscription stands now, it gets the lock well before the 30 s
        // lease it last saw would have ended.
        let released = std::time::Instant::now();
        holder.release().await.unwrap();
        finished(waiting, Duration::from_secs(25)).await.unwrap();
        assert!(
            released.elapsed() < Duration::from_secs(4),
            "round {round}: the waiter got the lock {:?} after the release",
            released.elapsed()
        );
        waiter.release().await.unwrap();
    }
}
