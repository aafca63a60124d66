//! A dropped client frees everything: once the last handle of a client (and
//! of its locks) is gone, Redis sees none of its connections and none of its
//! background tasks (renewal loop, pub/sub feeds, connection drivers) runs,
//! whatever its locks went through: a wait that timed out or was cancelled in
//! line, a handoff through the line, renewals, Redlock, Cluster.

use std::time::Duration;

use rlock_core::{Client, ClientOptions, Lock, LockOptions, Wait};
use rlock_test_support::{eventually, finished, Masters, RedisServer, SentinelGroup};

/// How long a dropped client may take to be gone: its tasks notice the drop
/// at once; a waiter channel of a client that stood in line lingers 2 s.
const SETTLES_WITHIN: Duration = Duration::from_secs(6);

/// What a client costs, seen from outside: the connections each server counts
/// (but the observer's own) and the tasks alive on this test's runtime.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Footprint {
    connections: Vec<usize>,
    tasks: usize,
}

/// Watches servers over connections of its own, opened once.
struct Observer {
    conns: Vec<redis::Connection>,
}

impl Observer {
    fn new(servers: &[&RedisServer]) -> Self {
        Observer {
            conns: servers.iter().map(|s| s.conn()).collect(),
        }
    }

    fn now(&mut self) -> Footprint {
        let connections = self
            .conns
            .iter_mut()
            .map(|c| {
                let list: String = redis::cmd("CLIENT").arg("LIST").query(c).unwrap();
                list.lines().count() - 1
            })
            .collect();
        Footprint {
            connections,
            tasks: tokio::runtime::Handle::current()
                .metrics()
                .num_alive_tasks(),
        }
    }

    /// Waits until the footprint is `baseline` again; fails with the last one
    /// seen otherwise.
    async fn settles_to(&mut self, baseline: &Footprint, after: &str) {
        let mut last = self.now();
        let back = eventually(SETTLES_WITHIN, || {
            last = self.now();
            last == *baseline
        })
        .await;
        assert!(
            back,
            "{after}: the dropped client left {last:?}, against {baseline:?} before it"
        );
    }

    fn queued(&mut self, name: &str) -> usize {
        redis::cmd("LLEN")
            .arg(format!("rlock:{{{name}}}:queue"))
            .query(&mut self.conns[0])
            .unwrap()
    }

    /// Waits until `n` waiters stand in the line of `name`.
    async fn in_line(&mut self, name: &str, n: usize) {
        let mut seen = 0;
        let there = eventually(Duration::from_secs(5), || {
            seen = self.queued(name);
            seen == n
        })
        .await;
        assert!(
            there,
            "{n} waiters never stood in line of {name} ({seen} did)"
        );
    }
}

/// A client on `server` holding `name`, so that others have to wait.
async fn holder(server: &RedisServer, name: &str) -> Lock {
    let client = Client::connect(&server.url()).await.unwrap();
    let lock = client.lock(name).unwrap();
    lock.acquire(Wait::Once).await.unwrap();
    lock
}

/// `lock` waits until `held` is released (`in_line`: standing in line
/// meanwhile), takes it over, and gives it back.
async fn take_over(observer: &mut Observer, lock: &Lock, held: &Lock, in_line: bool) {
    let waiting = {
        let lock = lock.clone();
        tokio::spawn(async move { lock.acquire(Wait::Forever).await })
    };
    if in_line {
        observer.in_line(lock.name(), 1).await;
    }
    held.release().await.unwrap();
    let got = finished(waiting, Duration::from_secs(5)).await.unwrap();
    assert_eq!(lock.fencing_token(), Some(got.fencing_token));
    lock.release().await.unwrap();
}

/// Goes straight into line on its first failed attempt.
fn queueing() -> LockOptions {
    LockOptions::default().queue_after(Duration::ZERO)
}

#[tokio::test]
async fn a_dropped_client_that_never_waited_leaves_nothing() {
    let server = RedisServer::start();
    let mut observer = Observer::new(&[&server]);
    let baseline = observer.now();
    let client = Client::connect(&server.url()).await.unwrap();
    let lock = client.lock("quiet").unwrap();
    lock.acquire(Wait::Once).await.unwrap();
    lock.release().await.unwrap();
    assert_ne!(observer.now(), baseline, "the client was never seen");
    drop((client, lock));
    observer
        .settles_to(&baseline, "acquired and released")
        .await;
}

#[tokio::test]
async fn a_dropped_client_whose_wait_timed_out_in_line_leaves_nothing() {
    let server = RedisServer::start();
    let _held = holder(&server, "timed-out").await;
    let mut observer = Observer::new(&[&server]);
    let baseline = observer.now();
    for fair in [false, true] {
        let client = Client::connect(&server.url()).await.unwrap();
        let lock = client
            .lock_with("timed-out", queueing().fair(fair))
            .unwrap();
        let err = lock
            .acquire(Wait::For(Duration::from_millis(200)))
            .await
            .unwrap_err();
        assert!(matches!(err, rlock_core::Error::Timeout { .. }), "{err:?}");
        drop((client, lock));
        observer
            .settles_to(&baseline, &format!("timed out in line (fair: {fair})"))
            .await;
    }
}

#[tokio::test]
async fn a_dropped_client_whose_wait_was_cancelled_in_line_leaves_nothing() {
    let server = RedisServer::start();
    let _held = holder(&server, "cancelled").await;
    let mut observer = Observer::new(&[&server]);
    let baseline = observer.now();
    let client = Client::connect(&server.url()).await.unwrap();
    let lock = client.lock_with("cancelled", queueing()).unwrap();
    let waiting = {
        let lock = lock.clone();
        tokio::spawn(async move { lock.acquire(Wait::Forever).await })
    };
    observer.in_line("cancelled", 1).await;
    waiting.abort();
    assert!(waiting.await.unwrap_err().is_cancelled());
    drop((client, lock));
    observer.settles_to(&baseline, "cancelled in line").await;
    assert_eq!(observer.queued("cancelled"), 0, "its entry left the line");
}

#[tokio::test]
async fn a_dropped_client_that_was_handed_the_lock_through_the_line_leaves_nothing() {
    let server = RedisServer::start();
    let held = holder(&server, "handed").await;
    let mut observer = Observer::new(&[&server]);
    let baseline = observer.now();
    let client = Client::connect(&server.url()).await.unwrap();
    let lock = client
        .lock_with("handed", LockOptions::default().fair(true))
        .unwrap();
    take_over(&mut observer, &lock, &held, true).await;
    drop((client, lock));
    observer.settles_to(&baseline, "handed over in line").await;
}

#[tokio::test]
async fn a_dropped_client_whose_watchdog_renewed_a_released_lock_leaves_nothing() {
    let server = RedisServer::start();
    let mut observer = Observer::new(&[&server]);
    let baseline = observer.now();
    let client = Client::connect(&server.url()).await.unwrap();
    let ttl = Duration::from_millis(300);
    let lock = client
        .lock_with("renewed", LockOptions::default().ttl(ttl))
        .unwrap();
    lock.acquire(Wait::Once).await.unwrap();
    // Held for two leases: only renewals keep it.
    tokio::time::sleep(ttl * 2).await;
    assert!(lock.owned().await.unwrap(), "the watchdog renewed it");
    assert_eq!(lock.lost(), None);
    lock.release().await.unwrap();
    drop((client, lock));
    observer
        .settles_to(&baseline, "renewed, then released")
        .await;
}

/// The finding this file began with: clients that queued were never freed,
/// so a process making and dropping clients leaked two connections per client.
#[tokio::test]
async fn ten_clients_that_queued_and_were_dropped_leave_no_connection() {
    let server = RedisServer::start();
    let _held = holder(&server, "churn").await;
    let mut observer = Observer::new(&[&server]);
    let baseline = observer.now();
    for _ in 0..10 {
        let client = Client::connect(&server.url()).await.unwrap();
        let lock = client.lock_with("churn", queueing()).unwrap();
        lock.acquire(Wait::For(Duration::from_millis(50)))
            .await
            .unwrap_err();
    }
    observer.settles_to(&baseline, "ten clients queued").await;
}

#[tokio::test]
async fn a_dropped_redlock_client_that_waited_leaves_nothing_on_any_master() {
    let servers = Masters::start(3);
    let urls = servers.urls();
    let rival = Client::connect_urls(&urls, ClientOptions::default())
        .await
        .unwrap();
    let held = rival.lock("quorum").unwrap();
    held.acquire(Wait::Once).await.unwrap();
    let mut observer = Observer::new(&servers.iter().collect::<Vec<_>>());
    let baseline = observer.now();
    let client = Client::connect_urls(&urls, ClientOptions::default())
        .await
        .unwrap();
    let lock = client.lock("quorum").unwrap();
    lock.acquire(Wait::For(Duration::from_millis(200)))
        .await
        .unwrap_err();
    take_over(&mut observer, &lock, &held, false).await;
    drop((client, lock));
    observer.settles_to(&baseline, "Redlock").await;
}

#[tokio::test]
async fn a_dropped_cluster_client_that_waited_in_line_leaves_nothing() {
    let server = RedisServer::start_cluster_node();
    let seeds = [server.url()];
    let options = ClientOptions::default().cluster(true);
    let rival = Client::connect_urls(&seeds, options.clone()).await.unwrap();
    let held = rival.lock("sharded").unwrap();
    held.acquire(Wait::Once).await.unwrap();
    let mut observer = Observer::new(&[&server]);
    let baseline = observer.now();
    let client = Client::connect_urls(&seeds, options).await.unwrap();
    let lock = client.lock_with("sharded", queueing()).unwrap();
    take_over(&mut observer, &lock, &held, true).await;
    drop((client, lock));
    observer.settles_to(&baseline, "Cluster").await;
}

#[tokio::test]
async fn a_dropped_sentinel_client_that_waited_in_line_leaves_nothing_on_the_master() {
    let group = SentinelGroup::start();
    let rival = Client::connect(&group.url()).await.unwrap();
    let held = rival.lock("watched").unwrap();
    held.acquire(Wait::Once).await.unwrap();
    let mut observer = Observer::new(&[&group.primary]);
    let baseline = observer.now();
    let client = Client::connect(&group.url()).await.unwrap();
    let lock = client.lock_with("watched", queueing()).unwrap();
    lock.acquire(Wait::For(Duration::from_millis(200)))
        .await
        .unwrap_err();
    drop((client, lock));
    observer.settles_to(&baseline, "Sentinel").await;
}
