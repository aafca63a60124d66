//! `Client::close()`: the locks still held are reported lost and given back,
//! waits in progress end, the connections close, and from then on every
//! operation of the client and of its locks fails with `Error::Closed`.

use std::time::{Duration, Instant};

use redis::Commands;
use rlock_core::{CacheOptions, Client, ClientOptions, Error, LockOptions, LostReason, Wait};
use rlock_test_support::{eventually, finished, Masters, RedisServer};

fn exists(server: &RedisServer, name: &str) -> bool {
    server.conn().exists(format!("rlock:{{{name}}}")).unwrap()
}

/// Connections the server counts, but the one asking.
fn connections(observer: &mut redis::Connection) -> usize {
    let list: String = redis::cmd("CLIENT").arg("LIST").query(observer).unwrap();
    list.lines().count() - 1
}

fn closed<T: std::fmt::Debug>(what: &str, outcome: rlock_core::Result<T>) {
    assert!(
        matches!(outcome, Err(Error::Closed)),
        "{what} after close: {outcome:?}"
    );
}

#[tokio::test]
async fn close_gives_back_every_held_lock_and_reports_it_lost() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let single = client.lock("single").unwrap();
    single.acquire(Wait::Once).await.unwrap();
    let nested = client.lock("nested").unwrap();
    nested.acquire(Wait::Once).await.unwrap();
    nested.acquire(Wait::Once).await.unwrap();
    let lost = single.lost_signal();
    client.close().await;
    assert_eq!(lost.await, Some(LostReason::Closed));
    assert_eq!(nested.lost(), Some(LostReason::Closed));
    assert!(!exists(&server, "single"), "released by close()");
    assert!(!exists(&server, "nested"), "every re-entry released");
    // Another client takes them at once, not after their leases.
    let other = Client::connect(&server.url()).await.unwrap();
    other
        .lock("single")
        .unwrap()
        .acquire(Wait::Once)
        .await
        .unwrap();
}

#[tokio::test]
async fn every_operation_after_close_fails_with_closed() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let held = client.lock("held").unwrap();
    held.acquire(Wait::Once).await.unwrap();
    let idle = client.lock("idle").unwrap();
    client.close().await;
    assert!(client.is_closed());
    closed("acquire", idle.acquire(Wait::Once).await);
    closed("acquire (waiting)", idle.acquire(Wait::Forever).await);
    closed("try_acquire", idle.try_acquire().await);
    closed("release", idle.release().await);
    closed("extend", held.extend(None).await);
    closed("state", idle.state().await);
    closed("locked", idle.locked().await);
    closed("owned", held.owned().await);
    // A lock made after close is refused the same way.
    closed(
        "a new lock's acquire",
        client.lock("new").unwrap().try_acquire().await,
    );
    // Ending the scope of a holding that close() ended says what happened to it.
    assert!(matches!(
        held.finish().await,
        Err(Error::Lost {
            reason: LostReason::Closed,
            ..
        })
    ));
    // Closing again is fine, and changes nothing.
    client.close().await;
    closed(
        "acquire after a second close",
        idle.acquire(Wait::Once).await,
    );
    assert!(!exists(&server, "held"));
}

#[tokio::test]
async fn close_ends_waits_in_progress_with_closed() {
    let server = RedisServer::start();
    let rival = Client::connect(&server.url()).await.unwrap();
    let held = rival.lock("busy").unwrap();
    held.acquire(Wait::Once).await.unwrap();
    let client = Client::connect(&server.url()).await.unwrap();
    let mut waits = Vec::new();
    for options in [
        LockOptions::default(),
        LockOptions::default().fair(true),
        LockOptions::default().queue_after(Duration::from_secs(3600)),
    ] {
        let lock = client.lock_with("busy", options).unwrap();
        waits.push(tokio::spawn(
            async move { lock.acquire(Wait::Forever).await },
        ));
    }
    // Every waiter is asleep (the lock is held for its whole lease): two in
    // line, the third listening for releases, or in line too when it found
    // the others there.
    let mut observer = server.conn();
    assert!(
        eventually(Duration::from_secs(5), || {
            let in_line: usize = redis::cmd("LLEN")
                .arg("rlock:{busy}:queue")
                .query(&mut observer)
                .unwrap();
            in_line == 3 || in_line == 2 && server.subscribers("rlock:{busy}:released") == 1
        })
        .await,
        "the waiters never went to sleep"
    );
    let closing = Instant::now();
    client.close().await;
    for wait in waits {
        closed(
            "a wait in progress",
            finished(wait, Duration::from_secs(3)).await,
        );
    }
    assert!(
        closing.elapsed() < Duration::from_secs(3),
        "took {:?}",
        closing.elapsed()
    );
    assert_eq!(held.lost(), None, "the other client's lock is untouched");
    assert!(held.owned().await.unwrap());
}

#[tokio::test]
async fn close_closes_the_connections_while_handles_are_still_alive() {
    let server = RedisServer::start();
    let mut observer = server.conn();
    let baseline = connections(&mut observer);
    let client = Client::connect(&server.url()).await.unwrap();
    let lock = client
        .lock_with("conns", LockOptions::default().queue_after(Duration::ZERO))
        .unwrap();
    lock.acquire(Wait::Once).await.unwrap();
    // A wait in line started the pub/sub connection.
    let rival = client.lock("conns").unwrap();
    rival
        .acquire(Wait::For(Duration::from_millis(100)))
        .await
        .unwrap_err();
    assert_eq!(connections(&mut observer), baseline + 2);
    client.close().await;
    assert!(
        eventually(Duration::from_secs(3), || connections(&mut observer)
            == baseline)
        .await,
        "{} connections left open",
        connections(&mut observer) - baseline
    );
    // The handles are still here, and refuse to work.
    closed("acquire", lock.acquire(Wait::Once).await);
}

#[tokio::test]
async fn close_returns_promptly_when_redis_does_not_answer() {
    let mut server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let lock = client
        .lock_with(
            "unreachable",
            LockOptions::default().ttl(Duration::from_secs(5)),
        )
        .unwrap();
    lock.acquire(Wait::Once).await.unwrap();
    server.stop();
    let started = Instant::now();
    client.close().await;
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "close() took {:?}",
        started.elapsed()
    );
    assert_eq!(lock.lost(), Some(LostReason::Closed));
}

#[tokio::test]
async fn a_redlock_client_gives_back_its_locks_on_every_master_when_closed() {
    let servers = Masters::start(3);
    let urls = servers.urls();
    let client = Client::connect_urls(&urls, ClientOptions::default())
        .await
        .unwrap();
    let lock = client.lock("quorum").unwrap();
    lock.acquire(Wait::Once).await.unwrap();
    client.close().await;
    for s in &servers {
        assert!(!exists(s, "quorum"), "still held on {}", s.url());
    }
    closed("acquire", lock.acquire(Wait::Once).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_a_client_mid_rebuild_wakes_the_callers_of_other_clients_waiting_for_it() {
    let server = RedisServer::start();
    let closing = Client::connect(&server.url()).await.unwrap();
    let other = Client::connect(&server.url()).await.unwrap();
    // A rebuild lease far past the test's deadline: only being told wakes them.
    let options = CacheOptions::new(Duration::from_secs(60)).lock_ttl(Duration::from_secs(120));
    let (started, loading) = tokio::sync::oneshot::channel();
    let stuck = {
        let (closing, options) = (closing.clone(), options.clone());
        tokio::spawn(async move {
            closing
                .cached("report", options, move || async move {
                    let _ = started.send(());
                    std::future::pending::<Result<Option<Vec<u8>>, String>>().await
                })
                .await
        })
    };
    loading.await.unwrap();
    let waiter = tokio::spawn(async move {
        other
            .cached("report", options, || async {
                Ok::<_, String>(Some(b"fresh".to_vec()))
            })
            .await
    });
    let mut observer = server.conn();
    let subscribed = eventually(Duration::from_secs(10), || {
        let numsub: (String, u64) = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg("rlock:{report}:cached:news")
            .query(&mut observer)
            .unwrap();
        numsub.1 == 1
    })
    .await;
    assert!(
        subscribed,
        "the other client's caller never waited on the entry's channel"
    );
    closing.close().await;
    let read = tokio::time::timeout(Duration::from_secs(20), waiter)
        .await
        .expect("the waiter slept on past the close, toward the rebuild's lease")
        .unwrap()
        .unwrap();
    assert_eq!(read, Some(b"fresh".to_vec()));
    stuck.abort();
}
