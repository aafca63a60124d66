//! The semaphore: at most `size` permits held at once, each holding under its
//! own lease; waiters stand in line and a release serves as many of them as
//! the permits it frees.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redis::Commands;
use rlock_core::{Client, Error, LockOptions, OptionName, Wait};
use rlock_test_support::{finished, until, RedisServer};

fn options(ttl: Duration) -> LockOptions {
    LockOptions::default().ttl(ttl)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_more_than_size_permits_are_held_by_sixteen_workers() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let inside = Arc::new(AtomicI64::new(0));
    let most = Arc::new(AtomicI64::new(0));
    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let sem = client
                .semaphore("jobs", 4, options(Duration::from_secs(10)))
                .unwrap();
            let (inside, most) = (inside.clone(), most.clone());
            tokio::spawn(async move {
                for _ in 0..20 {
                    sem.acquire(1, Wait::Forever).await.unwrap();
                    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    tokio::task::yield_now().await;
                    inside.fetch_sub(1, Ordering::SeqCst);
                    sem.release().await.unwrap();
                }
            })
        })
        .collect();
    for t in tasks {
        finished(t, Duration::from_secs(60)).await;
    }
    assert!(most.load(Ordering::SeqCst) <= 4, "{most:?} inside at once");
    assert!(
        most.load(Ordering::SeqCst) >= 2,
        "the permits were never shared"
    );
    let sem = client.semaphore("jobs", 4, LockOptions::default()).unwrap();
    assert_eq!(sem.available().await.unwrap(), 4);
    assert_eq!(
        redis.conn().exists::<_, bool>("rlock:{jobs}:semaphore"),
        Ok(false)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_of_two_permits_serves_two_waiters_and_each_gets_its_own_token() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let holder = client
        .semaphore("pair", 2, options(Duration::from_secs(30)))
        .unwrap();
    let first = holder.acquire(2, Wait::Once).await.unwrap();
    assert_eq!(holder.available().await.unwrap(), 0);
    // Each waiter holds its permit until told to let go.
    let (go, let_go) = tokio::sync::watch::channel(false);
    let waiters: Vec<_> = (0..3)
        .map(|_| {
            let sem = client
                .semaphore("pair", 2, options(Duration::from_secs(30)))
                .unwrap();
            let mut let_go = let_go.clone();
            tokio::spawn(async move {
                let got = sem.acquire(1, Wait::Forever).await.unwrap();
                let_go.wait_for(|go| *go).await.unwrap();
                sem.release().await.unwrap();
                got.fencing_token
            })
        })
        .collect();
    let probe = client.semaphore("pair", 2, LockOptions::default()).unwrap();
    until(|| async { probe.state().await.unwrap().waiting == 3 }).await;
    holder.release().await.unwrap();
    // Two are served at once; the third waits for one of them.
    until(|| async { probe.state().await.unwrap().waiting == 1 }).await;
    let state = probe.state().await.unwrap();
    assert_eq!(state.used(), 2);
    assert_eq!(state.holders.len(), 2);
    go.send_replace(true);
    let mut tokens = vec![first.fencing_token];
    for w in waiters {
        tokens.push(finished(w, Duration::from_secs(10)).await);
    }
    let mut sorted = tokens.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), 4, "tokens {tokens:?}");
    assert!(tokens[1..].iter().all(|t| *t > tokens[0]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_holders_permits_come_back_when_its_lease_ends() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let gone = Client::connect(&redis.url()).await.unwrap();
    let crashed = gone
        .semaphore(
            "lease",
            1,
            options(Duration::from_millis(300)).auto_renew(false),
        )
        .unwrap();
    crashed.acquire(1, Wait::Once).await.unwrap();
    let waiter = client
        .semaphore("lease", 1, options(Duration::from_secs(10)))
        .unwrap();
    let got = waiter
        .acquire(1, Wait::For(Duration::from_secs(5)))
        .await
        .unwrap();
    assert!(got.fencing_token > 0);
    assert_eq!(
        crashed.lock().lost(),
        Some(rlock_core::LostReason::LeaseEnded)
    );
    assert!(matches!(
        crashed.release().await,
        Err(Error::NotOwned { .. })
    ));
    waiter.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fair_mode_never_lets_small_requests_pass_a_large_one() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let fair = options(Duration::from_secs(30)).fair(true);
    let holder = client.semaphore("big", 3, fair.clone()).unwrap();
    holder.acquire(2, Wait::Once).await.unwrap();
    let big = client.semaphore("big", 3, fair.clone()).unwrap();
    let big_task = {
        let big = big.clone();
        tokio::spawn(async move { big.acquire(3, Wait::Forever).await.unwrap() })
    };
    let probe = client.semaphore("big", 3, LockOptions::default()).unwrap();
    until(|| async { probe.state().await.unwrap().waiting == 1 }).await;
    // One permit is free, but the large request came first.
    let small = client.semaphore("big", 3, fair).unwrap();
    assert!(small
        .permits(1)
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .is_none());
    holder.release().await.unwrap();
    finished(big_task, Duration::from_secs(10)).await;
    assert_eq!(probe.available().await.unwrap(), 0);
    big.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_permits_are_typed_errors_and_write_nothing() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    for n in [0, -1, 1_000_001] {
        let e = client
            .semaphore("bad", n, LockOptions::default())
            .unwrap_err();
        assert!(
            matches!(&e, Error::InvalidArgument(i) if i.option == Some(OptionName::Permits)),
            "{e}"
        );
    }
    let sem = client.semaphore("bad", 3, LockOptions::default()).unwrap();
    for take in [0, 4] {
        let e = sem.acquire(take, Wait::Once).await.unwrap_err();
        assert!(
            matches!(&e, Error::InvalidArgument(i) if i.option == Some(OptionName::Take)),
            "{e}"
        );
    }
    assert_eq!(Ok::<usize, ()>(redis.data_keys().len()), Ok(0));
    // Another size than the holders use names both.
    sem.acquire(1, Wait::Once).await.unwrap();
    let other = client.semaphore("bad", 5, LockOptions::default()).unwrap();
    let e = other.acquire(1, Wait::Once).await.unwrap_err();
    let text = e.to_string();
    assert!(text.contains('5') && text.contains('3'), "{text}");
    // So does a re-entry of the holder itself.
    let unit = sem.lock().owner().rsplit(':').next().unwrap();
    let same_owner = other.with_owner(unit);
    assert_eq!(same_owner.lock().owner(), sem.lock().owner());
    let e = same_owner.acquire(1, Wait::Once).await.unwrap_err();
    assert!(
        matches!(&e, Error::InvalidArgument(i) if i.option == Some(OptionName::Permits)),
        "{e}"
    );
    // A re-entry asks the same number of permits.
    let e = sem.acquire(2, Wait::Once).await.unwrap_err();
    assert!(
        matches!(&e, Error::InvalidArgument(i) if i.option == Some(OptionName::Take)),
        "{e}"
    );
    assert_eq!(sem.acquire(1, Wait::Once).await.unwrap().count, 2);
    assert_eq!(sem.available().await.unwrap(), 2);
    sem.release().await.unwrap();
    sem.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_id_ending_like_a_readers_still_counts_its_permits() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let sem = client.semaphore("ids", 1, LockOptions::default()).unwrap();
    sem.acquire(1, Wait::Once).await.unwrap();
    for unit in ["job/r", "job/w", "x"] {
        let other = sem.with_owner(unit);
        assert!(
            other
                .permits(1)
                .unwrap()
                .try_acquire()
                .await
                .unwrap()
                .is_none(),
            "{unit}"
        );
    }
    assert_eq!(sem.held().await.unwrap(), 1);
    sem.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_are_never_served_under_another_users_size() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let gone = Client::connect(&redis.url()).await.unwrap();
    let short = options(Duration::from_millis(300)).auto_renew(false);
    let crashed = gone.semaphore("sized", 2, short).unwrap();
    crashed.acquire(2, Wait::Once).await.unwrap();
    let waiters: Vec<_> = (0..2)
        .map(|_| {
            let sem = client
                .semaphore("sized", 2, options(Duration::from_secs(30)))
                .unwrap();
            tokio::spawn(async move {
                sem.acquire(1, Wait::For(Duration::from_secs(10)))
                    .await
                    .unwrap();
                sem
            })
        })
        .collect();
    let probe = client
        .semaphore("sized", 2, LockOptions::default())
        .unwrap();
    until(|| async { probe.state().await.unwrap().waiting == 2 }).await;
    // Once the crashed holder's lease ended, a user of another size arrives.
    until(|| async { probe.state().await.unwrap().holders.len() != 1 }).await;
    let other = client
        .semaphore("sized", 10, LockOptions::default())
        .unwrap();
    let refused = other.acquire(1, Wait::Once).await;
    let mut held = Vec::new();
    for w in waiters {
        held.push(finished(w, Duration::from_secs(10)).await);
    }
    let state = probe.state().await.unwrap();
    assert_eq!(state.size, Some(2), "{state:?}");
    assert_eq!(state.used(), 2, "{state:?}");
    assert!(
        matches!(&refused, Err(Error::InvalidArgument(i)) if i.option == Some(OptionName::Permits)),
        "{refused:?}"
    );
    for sem in held {
        sem.release().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_key_of_another_type_leaves_the_semaphore_working_and_untouched() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let mut conn = redis.conn();
    let _: () = conn
        .set("rlock:{odd}:semaphore:leases", "not a hash")
        .unwrap();
    let sem = client.semaphore("odd", 1, LockOptions::default()).unwrap();
    sem.acquire(1, Wait::Once).await.unwrap();
    let other = client.semaphore("odd", 1, LockOptions::default()).unwrap();
    let busy = other
        .acquire(1, Wait::For(Duration::from_millis(100)))
        .await;
    assert!(matches!(busy, Err(Error::Timeout { .. })), "{busy:?}");
    assert_eq!(sem.release().await.unwrap(), 0);
    assert_eq!(sem.available().await.unwrap(), 1);
    let value: String = conn.get("rlock:{odd}:semaphore:leases").unwrap();
    assert_eq!(value, "not a hash");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_of_small_requests_never_starves_a_large_one() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let looping: Vec<_> = (0..2)
        .map(|_| {
            let sem = client
                .semaphore("stream", 3, options(Duration::from_secs(10)))
                .unwrap();
            tokio::spawn(async move {
                for _ in 0..400 {
                    sem.acquire(1, Wait::Forever).await.unwrap();
                    tokio::task::yield_now().await;
                    sem.release().await.unwrap();
                }
            })
        })
        .collect();
    let large = client
        .semaphore("stream", 3, options(Duration::from_secs(10)))
        .unwrap();
    let got = large.acquire(3, Wait::For(Duration::from_secs(5))).await;
    assert!(got.is_ok(), "{got:?}");
    large.release().await.unwrap();
    for t in looping {
        finished(t, Duration::from_secs(60)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_leaving_while_the_holdings_hash_is_gone_lets_nobody_in() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let holder = client
        .semaphore("torn", 2, options(Duration::from_secs(30)))
        .unwrap();
    holder.acquire(2, Wait::Once).await.unwrap();
    let waiter = client
        .semaphore("torn", 2, options(Duration::from_secs(30)))
        .unwrap();
    let waiting = {
        let waiter = waiter.clone();
        tokio::spawn(async move { waiter.acquire(2, Wait::For(Duration::from_secs(20))).await })
    };
    until(|| async { holder.state().await.unwrap().waiting == 1 }).await;
    let _: () = redis::cmd("DEL")
        .arg("rlock:{torn}:semaphore")
        .query(&mut redis.conn())
        .unwrap();
    // A third one gives up: its leaving must not serve the line while the
    // holder's lease (still in the sorted set) runs.
    let quitter = client.semaphore("torn", 2, LockOptions::default()).unwrap();
    let gave_up = quitter
        .acquire(1, Wait::For(Duration::from_millis(200)))
        .await;
    assert!(matches!(gave_up, Err(Error::Timeout { .. })), "{gave_up:?}");
    let until_key: Vec<String> = redis
        .conn()
        .zrange("rlock:{torn}:semaphore:until", 0, -1)
        .unwrap();
    assert_eq!(until_key, vec![holder.lock().owner().to_owned()]);
    waiting.abort();
}
