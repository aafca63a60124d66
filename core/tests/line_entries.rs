//! A place in the waiting line belongs to one wait: it carries that wait's
//! lease, it is taken out once its owner stops waiting (also when Redis
//! never confirmed the leaving), and a free lock never sits behind a head
//! that does not come for it. Each test cuts the dequeue requests of one
//! client with the fault proxy (an asymmetric partition of the command wire)
//! or leaves an entry in line behind the client's back.

use std::time::{Duration, Instant};

use redis::Commands;
use rlock_core::{Client, Error, LockOptions, Wait};
use rlock_test_support::{
    behind_proxy, eventually, finished, script, Cut, FaultProxy, RedisServer,
};

/// Every dequeue request of the client behind `proxy` is cut before Redis
/// sees it, for as long as the test runs.
fn lose_every_dequeue(server: &RedisServer, proxy: &FaultProxy) {
    proxy.cut_on(&script(server, "mutex dequeue"), Cut::BeforeForward, 1000);
}

fn line(server: &RedisServer, name: &str) -> Vec<String> {
    server
        .conn()
        .lrange(format!("rlock:{{{name}}}:queue"), 0, -1)
        .unwrap()
}

/// Whether `n` waiters stand in the line of `name` within 10 s.
async fn in_line(server: &RedisServer, name: &str, n: usize) -> bool {
    eventually(Duration::from_secs(10), || line(server, name).len() == n).await
}

fn pttl(server: &RedisServer, name: &str) -> i64 {
    server.conn().pttl(format!("rlock:{{{name}}}")).unwrap()
}

fn fair(ttl: Duration) -> LockOptions {
    LockOptions::default().fair(true).ttl(ttl)
}

#[tokio::test]
async fn a_wait_again_by_the_owner_of_a_place_left_in_line_holds_under_its_own_lease() {
    let (server, proxy, waiting) = behind_proxy().await;
    let holding = Client::connect(&server.url()).await.unwrap();
    let holder = holding.lock("rebuild").unwrap();
    holder.acquire(Wait::Once).await.unwrap();
    // One thread waits with a 500 ms lease and gives up; its leaving never
    // reaches Redis (neither its sends nor the retries in the background).
    lose_every_dequeue(&server, &proxy);
    let short = waiting
        .lock_as("rebuild", fair(Duration::from_millis(500)), "thread-1")
        .unwrap();
    let gave_up = short.acquire(Wait::For(Duration::from_millis(300))).await;
    assert!(matches!(gave_up, Err(Error::Timeout { .. })), "{gave_up:?}");
    assert_eq!(line(&server, "rebuild"), [short.owner()]);
    // The same thread waits again, now with a 60 s lease.
    let long = waiting
        .lock_as("rebuild", fair(Duration::from_secs(60)), "thread-1")
        .unwrap();
    assert_eq!(long.owner(), short.owner());
    let again = {
        let long = long.clone();
        tokio::spawn(async move { long.acquire(Wait::For(Duration::from_secs(30))).await })
    };
    // Its place in line (the one left behind) now asks for this wait's lease.
    let leases = "rlock:{rebuild}:leases";
    let asks_60s = eventually(Duration::from_secs(15), || {
        server
            .conn()
            .hget::<_, _, Option<u64>>(leases, long.owner())
            .unwrap()
            == Some(60_000)
    })
    .await;
    assert!(asks_60s, "the place in line kept the earlier wait's lease");
    holder.release().await.unwrap();
    finished(again, Duration::from_secs(10)).await.unwrap();
    // Redis set the lease its holder counts on: nobody else gets in a
    // second later, and the holder has lost nothing.
    assert!(
        pttl(&server, "rebuild") > 50_000,
        "{}",
        pttl(&server, "rebuild")
    );
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let rival = holding.lock("rebuild").unwrap();
    assert_eq!(rival.try_acquire().await.unwrap(), None);
    assert_eq!(long.lost(), None);
    long.release().await.unwrap();
}

#[tokio::test]
async fn a_handoff_under_a_shorter_lease_than_the_wait_asked_is_confirmed_under_its_own() {
    let server = RedisServer::start();
    let holding = Client::connect(&server.url()).await.unwrap();
    let waiting = Client::connect(&server.url()).await.unwrap();
    let holder = holding.lock("report").unwrap();
    holder.acquire(Wait::Once).await.unwrap();
    let waiter = waiting
        .lock_with("report", fair(Duration::from_secs(60)))
        .unwrap();
    let wait = {
        let waiter = waiter.clone();
        tokio::spawn(async move { waiter.acquire(Wait::For(Duration::from_secs(20))).await })
    };
    assert!(in_line(&server, "report", 1).await);
    // What an earlier build left there: a place asking for 500 ms.
    let _: () = server
        .conn()
        .hset("rlock:{report}:leases", waiter.owner(), 500)
        .unwrap();
    holder.release().await.unwrap();
    finished(wait, Duration::from_secs(10)).await.unwrap();
    // Handed over under 500 ms, the holder set its own lease before it
    // counted on it.
    assert!(
        pttl(&server, "report") > 50_000,
        "{}",
        pttl(&server, "report")
    );
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(
        holding.lock("report").unwrap().try_acquire().await.unwrap(),
        None
    );
    assert_eq!(waiter.lost(), None);
}

#[tokio::test]
async fn a_waiter_behind_a_place_its_client_left_unconfirmed_gets_the_lock_its_holder_let_run_out()
{
    let (server, proxy, waiting) = behind_proxy().await;
    let holding = Client::connect(&server.url()).await.unwrap();
    // A holder that stops renewing (as if it crashed): its lease runs out.
    let holder = holding
        .lock_with(
            "stock",
            LockOptions::default()
                .ttl(Duration::from_secs(1))
                .auto_renew(false),
        )
        .unwrap();
    holder.acquire(Wait::Once).await.unwrap();
    lose_every_dequeue(&server, &proxy);
    let left = waiting
        .lock_as("stock", fair(Duration::from_secs(5)), "thread-1")
        .unwrap();
    let gave_up = left.acquire(Wait::For(Duration::from_millis(200))).await;
    assert!(matches!(gave_up, Err(Error::Timeout { .. })), "{gave_up:?}");
    // Another thread of the same client waits on: its client stays
    // subscribed, so the place left behind would look alive.
    let stays = waiting
        .lock_as("stock", fair(Duration::from_secs(5)), "thread-2")
        .unwrap();
    let waited = Instant::now();
    let staying = {
        let stays = stays.clone();
        tokio::spawn(async move { stays.acquire(Wait::For(Duration::from_secs(20))).await })
    };
    finished(staying, Duration::from_secs(10)).await.unwrap();
    assert!(
        waited.elapsed() < Duration::from_secs(4),
        "waited {:?} for a lock free after 1 s",
        waited.elapsed()
    );
    assert!(!line(&server, "stock").contains(&left.owner().to_owned()));
}

#[tokio::test]
async fn a_free_lock_is_handed_to_the_head_of_its_line_whose_client_passes_it_on() {
    let server = RedisServer::start();
    let holding = Client::connect(&server.url()).await.unwrap();
    let waiting = Client::connect(&server.url()).await.unwrap();
    let holder = holding
        .lock_with(
            "batch",
            LockOptions::default()
                .ttl(Duration::from_secs(1))
                .auto_renew(false),
        )
        .unwrap();
    holder.acquire(Wait::Once).await.unwrap();
    let stays = waiting
        .lock_with("batch", fair(Duration::from_secs(5)))
        .unwrap();
    let staying = {
        let stays = stays.clone();
        tokio::spawn(async move { stays.acquire(Wait::For(Duration::from_secs(20))).await })
    };
    assert!(in_line(&server, "batch", 1).await);
    // An entry of the waiting client's that no wait of it stands behind
    // (what a lost leaving of an earlier build left), first in line: it
    // looks alive, as its client listens on its waiter channel.
    let ghost = format!("{}:ghost", waiting.id());
    let mut c = server.conn();
    let _: () = c.lpush("rlock:{batch}:queue", &ghost).unwrap();
    let _: () = c.hset("rlock:{batch}:leases", &ghost, 5000).unwrap();
    // Another client's waiter, behind both.
    let third = holding
        .lock_with("batch", fair(Duration::from_secs(5)))
        .unwrap();
    let third_waits = {
        let third = third.clone();
        tokio::spawn(async move { third.acquire(Wait::For(Duration::from_secs(20))).await })
    };
    assert!(in_line(&server, "batch", 3).await);
    // The holder's lease runs out; the ghost is handed the lock by the
    // next attempt, its client passes the grant on, and the waiter
    // behind it holds it well before the ghost's 5 s lease.
    let start = Instant::now();
    finished(staying, Duration::from_secs(10)).await.unwrap();
    assert!(
        start.elapsed() < Duration::from_millis(3500),
        "waited {:?} behind a head that never came",
        start.elapsed()
    );
    stays.release().await.unwrap();
    finished(third_waits, Duration::from_secs(10))
        .await
        .unwrap();
}

/// Two waits of one owner (a handle used twice at once, as the
/// Node face allows): the second passes the clean-up gate (`waits_again`,
/// `cleaned_up`) before it takes the owner's turn, so what the first leaves
/// behind when it gives up (its failed dequeue, tried again 50 ms later in
/// the background; or its name in `Cleanups.left`, which another owner's
/// attempt then carries) acts on the second's fresh entry. The second
/// stands in line with no entry: a release frees the lock with a
/// `released` message it does not listen to, and it sleeps until the
/// holder's lease as seen at its last attempt.
#[tokio::test]
async fn a_second_wait_of_one_owner_keeps_its_place_when_the_first_leaves_unconfirmed() {
    let (server, proxy, waiting) = behind_proxy().await;
    let holding = Client::connect(&server.url()).await.unwrap();
    let holder = holding.lock("queue").unwrap();
    holder.acquire(Wait::Once).await.unwrap();
    let first = waiting
        .lock_as("queue", fair(Duration::from_secs(5)), "t")
        .unwrap();
    let second = waiting
        .lock_as("queue", fair(Duration::from_secs(5)), "t")
        .unwrap();
    assert_eq!(first.owner(), second.owner());
    // The first wait's leaving is lost on both sends (a wire reset); the
    // retry in the background, 50 ms later, gets through.
    proxy.cut_on(&script(&server, "mutex dequeue"), Cut::BeforeForward, 2);
    let first_wait = {
        let first = first.clone();
        tokio::spawn(async move { first.acquire(Wait::For(Duration::from_millis(800))).await })
    };
    assert!(eventually(Duration::from_secs(5), || line(&server, "queue").len() == 1).await);
    let second_wait = {
        let second = second.clone();
        tokio::spawn(async move { second.acquire(Wait::For(Duration::from_secs(15))).await })
    };
    let gave_up = finished(first_wait, Duration::from_secs(5)).await;
    assert!(matches!(gave_up, Err(Error::Timeout { .. })), "{gave_up:?}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let entries = line(&server, "queue");
    holder.release().await.unwrap();
    let released = Instant::now();
    let got = finished(second_wait, Duration::from_secs(20)).await;
    assert!(
        got.is_ok() && released.elapsed() < Duration::from_secs(3),
        "{got:?} after {:?} with the lock free (its line entries then: {entries:?})",
        released.elapsed()
    );
}
