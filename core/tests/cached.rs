//! `cached`: one rebuild per miss across every caller, fenced writes,
//! stale-while-revalidate, negative entries, invalidation, failures shared
//! with the callers that waited for them.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redis::Commands;
use rlock_core::{CacheOptions, Client, Error, OnError, Read, Stored};
use rlock_test_support::{until, RedisServer};

fn ttl(secs: u64) -> CacheOptions {
    CacheOptions::new(Duration::from_secs(secs))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_loader_runs_for_fifty_callers_on_a_miss_and_all_get_its_value() {
    let redis = RedisServer::start();
    let clients = [
        Client::connect(&redis.url()).await.unwrap(),
        Client::connect(&redis.url()).await.unwrap(),
    ];
    let loads = Arc::new(AtomicU32::new(0));
    let began = std::time::Instant::now();
    let tasks: Vec<_> = (0..50)
        .map(|i| {
            let client = clients[i % 2].clone();
            let loads = loads.clone();
            tokio::spawn(async move {
                client
                    .cached("product:1", ttl(60), move || async move {
                        loads.fetch_add(1, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        Ok::<_, String>(Some(b"keyboard".to_vec()))
                    })
                    .await
            })
        })
        .collect();
    for t in tasks {
        assert_eq!(t.await.unwrap().unwrap(), Some(b"keyboard".to_vec()));
    }
    assert_eq!(loads.load(Ordering::SeqCst), 1);
    // A hit is one script call: the entry as the rebuild wrote it.
    let mut conn = redis.conn();
    let fence: u64 = conn.hget("rlock:{product:1}:cached", "fence").unwrap();
    assert!(fence >= 1);
    let pttl: i64 = conn.pttl("rlock:{product:1}:cached").unwrap();
    let spent = began.elapsed().as_millis() as i64;
    assert!(
        (54_000 - spent - 10..=60_000).contains(&pttl),
        "jittered ttl {pttl} after {spent} ms"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_loader_reaches_every_caller_that_waited_for_it() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let cache = client.cache("broken", ttl(60)).unwrap();
    let Read::Load(rebuild) = cache.read().await.unwrap() else {
        panic!("the first caller loads");
    };
    let mut waiters = Vec::new();
    for _ in 0..5 {
        let c = Client::connect(&redis.url()).await.unwrap();
        waiters.push(tokio::spawn(async move {
            c.cached("broken", ttl(60), || async { Ok::<_, String>(None) })
                .await
        }));
    }
    // Each waiter's client subscribes once it saw the rebuild in progress.
    until(|| async { redis.subscribers("rlock:{broken}:cached:news") == 5 }).await;
    let mut conn = redis.conn();
    rebuild.fail("database down").await.unwrap();
    for w in waiters {
        match w.await.unwrap() {
            Err(Error::LoaderFailed { key, message }) => {
                assert_eq!(key, "broken");
                assert_eq!(message, "database down");
            }
            other => panic!("expected the loader's failure, got {other:?}"),
        }
    }
    // No lock left, no entry written: the next caller loads.
    let exists: bool = conn.exists("rlock:{broken}:rebuild").unwrap();
    assert!(!exists);
    assert!(matches!(cache.read().await.unwrap(), Read::Load(_)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_retry_the_waiters_rebuild_themselves_after_a_failure() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let options = ttl(60).on_error(OnError::Retry);
    let Read::Load(rebuild) = client
        .cache("flaky", options.clone())
        .unwrap()
        .read()
        .await
        .unwrap()
    else {
        panic!("the first caller loads");
    };
    let c = client.clone();
    let waiter = tokio::spawn(async move {
        c.cached("flaky", options, || async {
            Ok::<_, String>(Some(b"second".to_vec()))
        })
        .await
    });
    until(|| async { redis.subscribers("rlock:{flaky}:cached:news") == 1 }).await;
    rebuild.fail("first try failed").await.unwrap();
    assert_eq!(waiter.await.unwrap().unwrap(), Some(b"second".to_vec()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_under_an_older_token_never_replaces_a_newer_one() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let short = ttl(60).lock_ttl(Duration::from_millis(300));
    let cache = client.cache("slow-db", short.clone()).unwrap();
    let Read::Load(old) = cache.read().await.unwrap() else {
        panic!("loads");
    };
    // The old rebuilder's lease ends while its database is slow (its
    // renewal is cut off by deleting the lock, as an expiry would).
    let mut conn = redis.conn();
    let _: () = conn.del("rlock:{slow-db}:rebuild").unwrap();
    let Read::Load(new) = cache.read().await.unwrap() else {
        panic!("a second rebuild once the first lost its lock");
    };
    assert!(new.fence() > old.fence());
    assert_eq!(
        new.store(Some(b"new"), "bytes").await.unwrap(),
        Stored::Written
    );
    assert_eq!(
        old.store(Some(b"old"), "bytes").await.unwrap(),
        Stored::LockLost
    );
    let value: Vec<u8> = conn.hget("rlock:{slow-db}:cached", "value").unwrap();
    assert_eq!(value, b"new");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalidation_refuses_the_rebuild_running_across_it() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let cache = client.cache("price", ttl(60)).unwrap();
    let Read::Load(before) = cache.read().await.unwrap() else {
        panic!("loads");
    };
    assert!(!client.invalidate("price").await.unwrap());
    assert_eq!(
        before.store(Some(b"read before"), "bytes").await.unwrap(),
        Stored::Invalidated
    );
    let value = client
        .cached("price", ttl(60), || async {
            Ok::<_, String>(Some(b"after".to_vec()))
        })
        .await
        .unwrap();
    assert_eq!(value, Some(b"after".to_vec()));
    assert!(client.invalidate("price").await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_found_is_cached_for_the_none_ttl() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let loads = Arc::new(AtomicU32::new(0));
    let options = ttl(60).none_ttl(Duration::from_secs(2));
    let began = std::time::Instant::now();
    for _ in 0..20 {
        let loads = loads.clone();
        let v = client
            .cached("user:404", options.clone(), move || async move {
                loads.fetch_add(1, Ordering::SeqCst);
                Ok::<_, String>(None)
            })
            .await
            .unwrap();
        assert_eq!(v, None);
    }
    assert_eq!(loads.load(Ordering::SeqCst), 1);
    let pttl: i64 = redis.conn().pttl("rlock:{user:404}:cached").unwrap();
    // Jittered down by up to 10 %, written during the loop: it has lost at
    // most the loop's time since.
    let spent = began.elapsed().as_millis() as i64;
    assert!(
        (1_800 - spent - 10..=2_000).contains(&pttl),
        "none ttl {pttl} after {spent} ms"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_entry_is_served_at_once_while_one_caller_refreshes_it() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let options = CacheOptions::new(Duration::from_millis(200))
        .stale(Some(Duration::from_secs(30)))
        .jitter(0.0)
        .early(0.0);
    let cache = client.cache("feed", options).unwrap();
    let Read::Load(first) = cache.read().await.unwrap() else {
        panic!("loads");
    };
    first.store(Some(b"v1"), "bytes").await.unwrap();
    tokio::time::sleep(Duration::from_millis(250)).await;
    let mut refreshes = Vec::new();
    let mut hits = 0;
    for _ in 0..10 {
        match cache.read().await.unwrap() {
            Read::Refresh(entry, rebuild) => {
                assert_eq!(entry.value.as_deref(), Some(&b"v1"[..]));
                refreshes.push(rebuild);
            }
            Read::Hit(entry) => {
                assert_eq!(entry.value.as_deref(), Some(&b"v1"[..]));
                hits += 1;
            }
            Read::Load(_) => panic!("a stale entry within the window is served"),
        }
    }
    assert_eq!(refreshes.len(), 1, "one refresh, {hits} plain hits");
    let rebuild = refreshes.pop().unwrap();
    assert_eq!(
        rebuild.store(Some(b"v2"), "bytes").await.unwrap(),
        Stored::Written
    );
    match cache.read().await.unwrap() {
        Read::Hit(entry) => assert_eq!(entry.value.as_deref(), Some(&b"v2"[..])),
        _ => panic!("fresh again"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_before_any_io() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    assert!(matches!(
        client.cache("", ttl(1)),
        Err(Error::InvalidArgument(_))
    ));
    let zero = CacheOptions::new(Duration::ZERO);
    assert!(matches!(
        client.cache("k", zero),
        Err(Error::InvalidArgument(_))
    ));
    // Someone else's data under the entry's key is reported, never replaced.
    let mut conn = redis.conn();
    let _: () = conn.set("rlock:{theirs}:cached", "not ours").unwrap();
    let r = client
        .cached("theirs", ttl(60), || async {
            Ok::<_, String>(Some(b"x".to_vec()))
        })
        .await;
    assert!(matches!(r, Err(Error::Connection(_))), "{r:?}");
    let kept: String = conn.get("rlock:{theirs}:cached").unwrap();
    assert_eq!(kept, "not ours");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn someone_elses_data_in_the_way_is_reported_within_the_timeout_and_left_alone() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let mut conn = redis.conn();
    let quick = ttl(60).timeout(Some(Duration::from_millis(300)));
    let load = || async { Ok::<_, String>(Some(b"x".to_vec())) };
    // The slot's fence counter is no number: the rebuild lock cannot be
    // taken, which is said, not retried for ever.
    let keys = rlock_core::CacheKeys::new("rlock", "counter");
    let _: () = conn.set(&keys.rebuild.fence, "not a number").unwrap();
    let r = tokio::time::timeout(
        Duration::from_secs(5),
        client.cached("counter", quick.clone(), load),
    )
    .await
    .expect("a read past its timeout");
    assert!(matches!(r, Err(Error::Connection(_))), "{r:?}");
    // A hash at the rebuild lock's key that is no holding, a hash at the
    // entry's key that is no entry: reported, and never written into.
    let _: () = conn
        .hset("rlock:{lockish}:rebuild", "their", "data")
        .unwrap();
    let _: () = conn
        .hset("rlock:{entryish}:cached", "their", "data")
        .unwrap();
    for key in ["lockish", "entryish"] {
        let r = client.cached(key, quick.clone(), load).await;
        assert!(matches!(r, Err(Error::Connection(_))), "{key}: {r:?}");
        assert!(matches!(
            client.invalidate(key).await,
            Err(Error::Connection(_))
        ));
    }
    let theirs: Vec<(String, String)> = conn.hgetall("rlock:{lockish}:rebuild").unwrap();
    assert_eq!(theirs, vec![("their".to_owned(), "data".to_owned())]);
    let theirs: Vec<(String, String)> = conn.hgetall("rlock:{entryish}:cached").unwrap();
    assert_eq!(theirs, vec![("their".to_owned(), "data".to_owned())]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn options_out_of_range_are_refused() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    for options in [
        ttl(60).timeout(Some(Duration::MAX)),
        ttl(60).lock_ttl(Duration::from_millis(2)),
        ttl(60).jitter(1.0),
        ttl(60).early(-1.0),
    ] {
        let r = client.cache("k", options);
        assert!(matches!(r, Err(Error::InvalidArgument(_))), "{:?}", r.err());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loaded_value_reaches_its_caller_when_redis_does_not_take_it() {
    let redis = RedisServer::start();
    let proxy = rlock_test_support::FaultProxy::start(redis.port);
    let client = Client::connect(&proxy.url()).await.unwrap();
    // Both sends of the write are cut before Redis sees them.
    proxy.cut_on(b"UNSTORED-VALUE", rlock_test_support::Cut::BeforeForward, 2);
    let v = client
        .cached("unstored", ttl(60), || async {
            Ok::<_, String>(Some(b"UNSTORED-VALUE".to_vec()))
        })
        .await
        .unwrap();
    assert_eq!(v, Some(b"UNSTORED-VALUE".to_vec()));
    let exists: bool = redis.conn().exists("rlock:{unstored}:cached").unwrap();
    assert!(!exists);
}

/// Whether the entry of `key` turned stale by the server's clock.
fn stale_now(redis: &RedisServer, key: &str) -> bool {
    let mut conn = redis.conn();
    let fresh: Option<u64> = conn
        .hget(format!("rlock:{{{key}}}:cached"), "fresh")
        .unwrap();
    let (s, us): (u64, u64) = redis::cmd("TIME").query(&mut conn).unwrap();
    fresh.is_some_and(|f| f <= s * 1000 + us / 1000)
}

fn value(read: &Read) -> Option<&[u8]> {
    match read {
        Read::Hit(e) | Read::Refresh(e, _) => e.value.as_deref(),
        Read::Load(_) => None,
    }
}

/// A stale entry is a value only to a caller whose own window covers it:
/// without one a caller waits for the load like on a miss, and past the
/// window the writer gave the entry (its key's expiry) nobody is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_stale_window_or_past_it_callers_wait_for_the_load() {
    let redis = RedisServer::start();
    let exact = |ms| {
        CacheOptions::new(Duration::from_millis(ms))
            .jitter(0.0)
            .early(0.0)
    };
    let patient = exact(200).stale(Some(Duration::from_secs(30)));
    let strict = exact(200);
    let client = Client::connect(&redis.url()).await.unwrap();
    let Read::Load(first) = client
        .cache("board", patient.clone())
        .unwrap()
        .read()
        .await
        .unwrap()
    else {
        panic!("a missing entry is loaded");
    };
    first.store(Some(b"v1"), "bytes").await.unwrap();
    until(|| async { stale_now(&redis, "board") }).await;

    // Without a window of its own a caller rebuilds the stale entry ...
    let Read::Load(second) = client
        .cache("board", strict.clone())
        .unwrap()
        .read()
        .await
        .unwrap()
    else {
        panic!("a stale entry is no value to a caller without a stale window");
    };
    // ... and another such caller waits for that load, while a caller whose
    // window covers the entry gets the old value at once.
    let other = Client::connect(&redis.url()).await.unwrap();
    let waiting = {
        let cache = other.cache("board", strict.clone()).unwrap();
        tokio::spawn(async move { cache.read().await.unwrap() })
    };
    until(|| async { redis.subscribers("rlock:{board}:cached:news") == 1 }).await;
    let served = tokio::time::timeout(
        Duration::from_secs(1),
        other.cache("board", patient.clone()).unwrap().read(),
    )
    .await
    .expect("a caller within its window waited")
    .unwrap();
    assert_eq!(value(&served), Some(&b"v1"[..]));
    assert!(
        !waiting.is_finished(),
        "a caller without a window was served stale"
    );
    // Written without a window (by a strict caller), the entry is kept only
    // while fresh: once it expires, even a patient caller has nothing to be
    // served and loads.
    second.store(Some(b"v2"), "bytes").await.unwrap();
    let woken = rlock_test_support::finished(waiting, Duration::from_secs(5)).await;
    assert_eq!(value(&woken), Some(&b"v2"[..]));
    until(|| async {
        let exists: bool = redis.conn().exists("rlock:{board}:cached").unwrap();
        !exists
    })
    .await;
    let read = client
        .cache("board", patient)
        .unwrap()
        .read()
        .await
        .unwrap();
    assert!(matches!(read, Read::Load(_)), "an expired entry was served");
}

/// XFetch: a hot entry slow to rebuild is refreshed early by one caller
/// while every other caller keeps reading the current value, at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_caller_refreshes_early_while_the_others_read_the_current_value() {
    let redis = RedisServer::start();
    // A load of 300 ms against 2 s of freshness and early=100: each read
    // refreshes with a chance above 0.9.
    let options = CacheOptions::new(Duration::from_secs(2))
        .jitter(0.0)
        .early(100.0);
    let client = Client::connect(&redis.url()).await.unwrap();
    let cache = client.cache("quote", options.clone()).unwrap();
    let Read::Load(first) = cache.read().await.unwrap() else {
        panic!("a missing entry is loaded");
    };
    tokio::time::sleep(Duration::from_millis(300)).await; // the loader's work
    first.store(Some(b"v1"), "bytes").await.unwrap();
    let refresh = loop {
        match cache.read().await.unwrap() {
            Read::Refresh(entry, rebuild) => {
                assert_eq!(entry.value.as_deref(), Some(&b"v1"[..]));
                break rebuild;
            }
            Read::Hit(entry) => assert_eq!(entry.value.as_deref(), Some(&b"v1"[..])),
            Read::Load(_) => panic!("a fresh entry was loaded"),
        }
        assert!(!stale_now(&redis, "quote"), "never refreshed early");
    };
    let others = Client::connect(&redis.url()).await.unwrap();
    let readers: Vec<_> = (0..20)
        .map(|_| {
            let cache = others.cache("quote", options.clone()).unwrap();
            tokio::spawn(async move { cache.read().await.unwrap() })
        })
        .collect();
    for r in readers {
        let read = rlock_test_support::finished(r, Duration::from_secs(1)).await;
        match read {
            Read::Hit(entry) => assert_eq!(entry.value.as_deref(), Some(&b"v1"[..])),
            Read::Refresh(..) => panic!("a second caller refreshed during the refresh"),
            Read::Load(_) => panic!("a fresh entry was loaded"),
        }
    }
    assert_eq!(
        refresh.store(Some(b"v2"), "bytes").await.unwrap(),
        Stored::Written
    );
}

/// Waiters for a rebuild send nothing while it runs: each is woken by the
/// entry's message (or its rebuilder's lease), never by polling.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_send_no_command_while_the_rebuild_runs() {
    let redis = RedisServer::start();
    let options = ttl(60).lock_ttl(Duration::from_secs(30));
    let client = Client::connect(&redis.url()).await.unwrap();
    let Read::Load(rebuild) = client
        .cache("slow", options.clone())
        .unwrap()
        .read()
        .await
        .unwrap()
    else {
        panic!("a missing entry is loaded");
    };
    let mut waiters = Vec::new();
    for _ in 0..10 {
        let c = Client::connect(&redis.url()).await.unwrap();
        let options = options.clone();
        waiters.push(tokio::spawn(async move {
            c.cached("slow", options, || async { Ok::<_, String>(None) })
                .await
        }));
    }
    until(|| async { redis.subscribers("rlock:{slow}:cached:news") == 10 }).await;
    // Each looks once more after subscribing, then sleeps: wait for the
    // requests to stop.
    let requests = || redis.calls("evalsha") + redis.calls("eval");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut last = requests();
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = requests();
        if now == last {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the waiters never settled"
        );
        last = now;
    }
    let before = requests();
    // A second of the rebuild running: not one request from the waiters.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = requests();
    assert_eq!(after, before, "waiters sent {} requests", after - before);
    rebuild.store(Some(b"done"), "bytes").await.unwrap();
    for w in waiters {
        let v = rlock_test_support::finished(w, Duration::from_secs(5)).await;
        assert_eq!(v.unwrap(), Some(b"done".to_vec()));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hot_short_lived_entry_slow_to_load_is_loaded_about_once_per_ttl() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let loads = Arc::new(AtomicU32::new(0));
    // 32 readers every 10 ms of an entry fresh for 1 s whose load takes
    // 300 ms, with the default early refresh: XFetch's own window (300 ms x
    // ln(reads per load), about 2 s here) is longer than the ttl.
    let options = CacheOptions::new(Duration::from_secs(1)).jitter(0.0);
    let began = std::time::Instant::now();
    let run_for = Duration::from_secs(4);
    let readers: Vec<_> = (0..32)
        .map(|_| {
            let (client, loads, options) = (client.clone(), loads.clone(), options.clone());
            tokio::spawn(async move {
                while began.elapsed() < run_for {
                    let loads = loads.clone();
                    client
                        .cached("hot", options.clone(), move || async move {
                            loads.fetch_add(1, Ordering::SeqCst);
                            tokio::time::sleep(Duration::from_millis(300)).await;
                            Ok::<_, String>(Some(b"v".to_vec()))
                        })
                        .await
                        .unwrap();
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            })
        })
        .collect();
    for r in readers {
        r.await.unwrap();
    }
    // One load per ttl, plus the one that ran as the readers stopped (a
    // load's 300 ms and the early window's quarter of the ttl shorten the
    // cycle to 1.05 s at the least).
    let elapsed = began.elapsed().as_secs_f64();
    let loads = loads.load(Ordering::SeqCst);
    let most = (elapsed / 1.05).ceil() as u32 + 1;
    assert!(loads <= most, "{loads} loads in {elapsed:.1} s");
}
