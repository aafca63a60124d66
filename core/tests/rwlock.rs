//! The read-write lock: any number of readers or one writer, writers not
//! starved by a stream of readers, re-entry, downgrade, and an upgrade
//! refused at once.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rlock_core::{Client, Error, LockOptions, Wait};
use rlock_test_support::{finished, until, RedisServer};

fn options() -> LockOptions {
    LockOptions::default().ttl(Duration::from_secs(10))
}

/// Readers inside count 1 each; a writer counts 1000.
#[derive(Default)]
struct Inside(AtomicI64);

impl Inside {
    fn enter(&self, weight: i64) {
        let now = self.0.fetch_add(weight, Ordering::SeqCst) + weight;
        assert!(now <= 1000, "a writer with someone else inside ({now})");
    }
    fn leave(&self, weight: i64) {
        self.0.fetch_sub(weight, Ordering::SeqCst);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_a_writer_with_anyone_else_inside() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let inside = Arc::new(Inside::default());
    let most_readers = Arc::new(AtomicI64::new(0));
    let tasks: Vec<_> = (0..8)
        .map(|i| {
            let rw = client.rw_lock("doc", options()).unwrap();
            let (inside, most_readers) = (inside.clone(), most_readers.clone());
            tokio::spawn(async move {
                for _ in 0..25 {
                    let (side, weight) = match i % 4 {
                        0 => (rw.write(), 1000),
                        _ => (rw.read(), 1),
                    };
                    side.acquire(Wait::Forever).await.unwrap();
                    inside.enter(weight);
                    if weight == 1 {
                        most_readers.fetch_max(inside.0.load(Ordering::SeqCst), Ordering::SeqCst);
                    }
                    tokio::task::yield_now().await;
                    inside.leave(weight);
                    side.release().await.unwrap();
                }
            })
        })
        .collect();
    for t in tasks {
        finished(t, Duration::from_secs(60)).await;
    }
    assert!(
        most_readers.load(Ordering::SeqCst) >= 2,
        "readers never shared"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_writer_makes_new_readers_wait_behind_it() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let reader = client.rw_lock("pref", options()).unwrap();
    reader.read().acquire(Wait::Once).await.unwrap();
    let writer = client.rw_lock("pref", options()).unwrap();
    let write = {
        let writer = writer.clone();
        tokio::spawn(async move { writer.write().acquire(Wait::Forever).await.unwrap() })
    };
    until(|| async { reader.state().await.unwrap().waiting == 1 }).await;
    let late = client.rw_lock("pref", options()).unwrap();
    assert!(late.read().try_acquire().await.unwrap().is_none());
    // The reader inside re-enters: it must never wait on the writer it blocks.
    assert_eq!(reader.read().acquire(Wait::Once).await.unwrap().count, 2);
    reader.read().release().await.unwrap();
    reader.read().release().await.unwrap();
    let written = finished(write, Duration::from_secs(10)).await;
    let state = reader.state().await.unwrap();
    assert_eq!(state.holders.len(), 1);
    assert!(state.holders[0].writes());
    assert_eq!(state.holders[0].fence, written.fencing_token);
    writer.write().release().await.unwrap();
    assert!(late.read().try_acquire().await.unwrap().is_some());
    late.read().release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_is_refused_at_once_and_a_downgrade_lets_no_writer_in_between() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let rw = client.rw_lock("grade", options()).unwrap();
    rw.read().acquire(Wait::Once).await.unwrap();
    let e = rw.write().acquire(Wait::Forever).await.unwrap_err();
    assert!(matches!(e, Error::Upgrade { .. }), "{e}");
    assert_eq!(e.category(), "upgrade");
    rw.read().release().await.unwrap();

    // Write, then read inside it, then end the write: still reading.
    let w = rw.write().acquire(Wait::Once).await.unwrap();
    let r = rw.read().acquire(Wait::Once).await.unwrap();
    assert!(r.fencing_token > w.fencing_token);
    assert_eq!(rw.write().acquire(Wait::Once).await.unwrap().count, 2);
    rw.write().release().await.unwrap();
    let other = client.rw_lock("grade", options()).unwrap();
    let write = {
        let other = other.clone();
        tokio::spawn(async move { other.write().acquire(Wait::Forever).await.unwrap() })
    };
    until(|| async { rw.state().await.unwrap().waiting == 1 }).await;
    rw.write().release().await.unwrap();
    // Downgraded: the waiting writer still waits, and a reader comes after it.
    let state = rw.state().await.unwrap();
    assert_eq!(state.holders.len(), 1, "{state:?}");
    assert!(!state.holders[0].writes());
    assert!(rw.read().owned().await.unwrap());
    rw.read().release().await.unwrap();
    let got = finished(write, Duration::from_secs(10)).await;
    assert!(got.fencing_token > r.fencing_token);
    other.write().release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_lets_every_reader_in_line_in_together() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let writer = client.rw_lock("many", options()).unwrap();
    writer.write().acquire(Wait::Once).await.unwrap();
    let readers: Vec<_> = (0..5)
        .map(|_| {
            let rw = client.rw_lock("many", options()).unwrap();
            tokio::spawn(async move {
                rw.read().acquire(Wait::Forever).await.unwrap();
                rw
            })
        })
        .collect();
    until(|| async { writer.state().await.unwrap().waiting == 5 }).await;
    writer.write().release().await.unwrap();
    let mut inside = Vec::new();
    for r in readers {
        inside.push(finished(r, Duration::from_secs(10)).await);
    }
    assert_eq!(writer.state().await.unwrap().holders.len(), 5);
    assert!(writer.write().try_acquire().await.unwrap().is_none());
    for rw in inside {
        rw.read().release().await.unwrap();
    }
    assert!(writer.write().try_acquire().await.unwrap().is_some());
    writer.write().release().await.unwrap();
    assert_eq!(
        redis.data_keys().len(),
        1,
        "only the slot's fence counter is left"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_readers_share_ends_with_its_lease_and_the_writer_hears_of_it() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let gone = Client::connect(&redis.url()).await.unwrap();
    let dead = gone
        .rw_lock(
            "crash",
            LockOptions::default()
                .ttl(Duration::from_millis(300))
                .auto_renew(false),
        )
        .unwrap();
    dead.read().acquire(Wait::Once).await.unwrap();
    let alive = client.rw_lock("crash", options()).unwrap();
    alive.read().acquire(Wait::Once).await.unwrap();
    let writer = client.rw_lock("crash", options()).unwrap();
    let write = {
        let writer = writer.clone();
        tokio::spawn(async move {
            writer
                .write()
                .acquire(Wait::For(Duration::from_secs(5)))
                .await
        })
    };
    until(|| async { alive.state().await.unwrap().holders.len() == 1 }).await;
    alive.read().release().await.unwrap();
    finished(write, Duration::from_secs(10)).await.unwrap();
    assert!(dead.read().lost().is_some());
    writer.write().release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_writer_reads_at_once_while_other_writers_wait_fair_or_not() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    for fair in [false, true] {
        let name = format!("own-{fair}");
        let rw = client.rw_lock(&name, options().fair(fair)).unwrap();
        rw.write().acquire(Wait::Once).await.unwrap();
        let other = client.rw_lock(&name, options().fair(fair)).unwrap();
        let waiting = {
            let other = other.clone();
            tokio::spawn(async move { other.write().acquire(Wait::Forever).await.unwrap() })
        };
        until(|| async { rw.state().await.unwrap().waiting == 1 }).await;
        assert!(
            rw.read().try_acquire().await.unwrap().is_some(),
            "fair: {fair}"
        );
        rw.write().release().await.unwrap();
        rw.read().release().await.unwrap();
        finished(waiting, Duration::from_secs(10)).await;
        other.write().release().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_left_without_their_holdings_keep_everyone_out_until_they_end() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let writer = client.rw_lock("evicted", options()).unwrap();
    writer.write().acquire(Wait::Once).await.unwrap();
    // The holdings' hash is gone (evicted, deleted), its leases are not.
    let _: () = redis::cmd("DEL")
        .arg("rlock:{evicted}:rwlock")
        .query(&mut redis.conn())
        .unwrap();
    let reader = client.rw_lock("evicted", options()).unwrap();
    assert!(reader.read().try_acquire().await.unwrap().is_none());
    assert!(reader.write().try_acquire().await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_kept_without_their_holdings_hash_let_no_second_writer_in() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let writer = client.rw_lock("half", options()).unwrap();
    writer.write().acquire(Wait::Once).await.unwrap();
    let _: () = redis::cmd("DEL")
        .arg("rlock:{half}:rwlock:until")
        .query(&mut redis.conn())
        .unwrap();
    let other = client.rw_lock("half", options()).unwrap();
    assert!(other.write().try_acquire().await.unwrap().is_none());
    assert!(other.read().try_acquire().await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_serving_a_writer_serves_its_own_read_waiting_right_behind_it() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let reader = client.rw_lock("both", options()).unwrap();
    reader.read().acquire(Wait::Once).await.unwrap();
    // One owner waits for its write and, beside it, its read.
    let rw = client.rw_lock("both", options()).unwrap();
    let write = {
        let rw = rw.clone();
        tokio::spawn(async move { rw.write().acquire(Wait::Forever).await.unwrap() })
    };
    until(|| async { reader.state().await.unwrap().waiting == 1 }).await;
    let read = {
        let rw = rw.clone();
        tokio::spawn(async move { rw.read().acquire(Wait::Forever).await.unwrap() })
    };
    until(|| async { reader.state().await.unwrap().waiting == 2 }).await;
    reader.read().release().await.unwrap();
    // Leases are 10 s: only the release explains both getting in soon.
    finished(write, Duration::from_secs(3)).await;
    finished(read, Duration::from_secs(3)).await;
    rw.read().release().await.unwrap();
    rw.write().release().await.unwrap();
}
