//! Network faults between `cached` and Redis, made deterministic by a fault
//! proxy (`FaultProxy`): each cache script applied by Redis with its reply
//! lost, and sent again by the core; the entry's messages heard late or
//! never; a rebuilder cut off for good; a rebuilder whose renewals never
//! arrive. Each test states the promise the fault must not break: one loader
//! per miss, every waiter answered (never stranded past the rebuilder's
//! lease), no value written under an older token over a newer one, no
//! rebuild lock left behind.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redis::Commands;
use rlock_core::{Cache, CacheKeys, CacheOptions, Client, Error, OnError, Read, Rebuild, Stored};
use rlock_test_support::{behind_proxy, finished, script, until, Cut, FaultProxy, RedisServer};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// The cache scripts, loaded into the server, by the SHA their calls carry
/// (see `rlock_test_support::script`).
struct Scripts {
    read: Vec<u8>,
    write: Vec<u8>,
    fail: Vec<u8>,
    invalidate: Vec<u8>,
}

impl Scripts {
    fn load(server: &RedisServer) -> Self {
        Scripts {
            read: script(server, "cache read"),
            write: script(server, "cache write"),
            fail: script(server, "cache fail"),
            invalidate: script(server, "cache invalidate"),
        }
    }
}

/// Entries fresh for a minute, never refreshed early (no XFetch draw: what
/// a read answers here must not depend on chance).
fn options() -> CacheOptions {
    CacheOptions::new(Duration::from_secs(60)).early(0.0)
}

fn keys(key: &str) -> CacheKeys {
    CacheKeys::new("rlock", key)
}

/// The entry's value and fencing token, as Redis holds them.
fn stored(server: &RedisServer, key: &str) -> Option<(Vec<u8>, u64)> {
    let (value, fence): (Option<Vec<u8>>, Option<u64>) = redis::cmd("HMGET")
        .arg(keys(key).entry)
        .arg("value")
        .arg("fence")
        .query(&mut server.conn())
        .unwrap();
    Some((value?, fence?))
}

fn exists(server: &RedisServer, key: &str) -> bool {
    server.conn().exists(key).unwrap()
}

/// The rebuild a read of an entry missing gives its caller.
async fn loads(cache: &Cache) -> Rebuild {
    match cache.read().await.unwrap() {
        Read::Load(rebuild) => rebuild,
        Read::Hit(_) | Read::Refresh(..) => panic!("a missing entry is loaded"),
    }
}

/// The refresh of an entry, once it turned stale (within its window).
async fn refreshing(cache: &Cache) -> Rebuild {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match cache.read().await.unwrap() {
            Read::Refresh(_, rebuild) => return rebuild,
            Read::Hit(_) => {}
            Read::Load(_) => panic!("a stale entry within its window is served"),
        }
        assert!(Instant::now() < deadline, "the entry never turned stale");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// `n` callers of `key`, each on a client of its own connected straight to
/// the server, whose loader counts its runs in `loaded` and gives `value`.
async fn callers(
    server: &RedisServer,
    key: &'static str,
    options: &CacheOptions,
    n: usize,
    loaded: &Arc<AtomicU32>,
    value: &'static [u8],
) -> Vec<JoinHandle<rlock_core::Result<Option<Vec<u8>>>>> {
    let mut tasks = Vec::new();
    for _ in 0..n {
        let client = Client::connect(&server.url()).await.unwrap();
        tasks.push(caller(client, key, options, loaded, value));
    }
    tasks
}

/// One such caller, on `client`.
fn caller(
    client: Client,
    key: &'static str,
    options: &CacheOptions,
    loaded: &Arc<AtomicU32>,
    value: &'static [u8],
) -> JoinHandle<rlock_core::Result<Option<Vec<u8>>>> {
    let (options, loaded) = (options.clone(), loaded.clone());
    tokio::spawn(async move {
        client
            .cached(key, options, move || async move {
                loaded.fetch_add(1, Ordering::SeqCst);
                Ok::<_, String>(Some(value.to_vec()))
            })
            .await
    })
}

/// Waits until `n` clients listen on the entry's channel: each joined it
/// once it saw the rebuild in progress.
async fn waiting(server: &RedisServer, key: &str, n: i64) {
    let news = keys(key).news;
    until(|| async { server.subscribers(&news) == n }).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_whose_reply_was_lost_is_stored_once_frees_the_lock_and_reaches_every_waiter() {
    let (server, proxy, client) = behind_proxy().await;
    let scripts = Scripts::load(&server);
    let rebuild = loads(&client.cache("report", options()).unwrap()).await;
    let fence = rebuild.fence();
    let loaded = Arc::new(AtomicU32::new(0));
    let waiters = callers(&server, "report", &options(), 3, &loaded, b"theirs").await;
    waiting(&server, "report", 3).await;
    proxy.cut_on(&scripts.write, Cut::AfterForward, 1);
    // Written, its reply lost, sent again on a new connection while the
    // lock is still held: the same entry under the same token, once more.
    let outcome = rebuild.store(Some(b"quarterly"), "bytes").await.unwrap();
    assert_eq!(outcome, Stored::Written);
    assert_eq!(proxy.cuts_done(), 1);
    assert_eq!(
        stored(&server, "report"),
        Some((b"quarterly".to_vec(), fence))
    );
    assert!(
        !exists(&server, &keys("report").rebuild.lock),
        "the rebuild lock outlived the store"
    );
    for w in waiters {
        let value = finished(w, Duration::from_secs(5)).await.unwrap();
        assert_eq!(value, Some(b"quarterly".to_vec()));
    }
    assert_eq!(loaded.load(Ordering::SeqCst), 0, "a waiter loaded again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_whose_reply_was_lost_still_reaches_every_waiter_and_leaves_no_lock() {
    let (server, proxy, client) = behind_proxy().await;
    let scripts = Scripts::load(&server);
    let rebuild = loads(&client.cache("broken", options()).unwrap()).await;
    let loaded = Arc::new(AtomicU32::new(0));
    let waiters = callers(&server, "broken", &options(), 3, &loaded, b"theirs").await;
    waiting(&server, "broken", 3).await;
    proxy.cut_on(&scripts.fail, Cut::AfterForward, 1);
    rebuild.fail("database down").await.unwrap();
    assert_eq!(proxy.cuts_done(), 1);
    assert!(!exists(&server, &keys("broken").rebuild.lock));
    for w in waiters {
        match finished(w, Duration::from_secs(5)).await {
            Err(Error::LoaderFailed { key, message }) => {
                assert_eq!(key, "broken");
                assert_eq!(message, "database down");
            }
            other => panic!("expected the loader's failure, got {other:?}"),
        }
    }
    assert_eq!(loaded.load(Ordering::SeqCst), 0, "a waiter loaded");
    assert_eq!(stored(&server, "broken"), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_retry_a_failure_whose_reply_was_lost_leaves_one_waiter_to_rebuild_for_all() {
    let (server, proxy, client) = behind_proxy().await;
    let scripts = Scripts::load(&server);
    let retry = options().on_error(OnError::Retry);
    let rebuild = loads(&client.cache("flaky", retry.clone()).unwrap()).await;
    let failed = rebuild.fence();
    let loaded = Arc::new(AtomicU32::new(0));
    let waiters = callers(&server, "flaky", &retry, 3, &loaded, b"second try").await;
    waiting(&server, "flaky", 3).await;
    proxy.cut_on(&scripts.fail, Cut::AfterForward, 1);
    rebuild.fail("first try failed").await.unwrap();
    assert_eq!(proxy.cuts_done(), 1);
    for w in waiters {
        let value = finished(w, Duration::from_secs(5)).await.unwrap();
        assert_eq!(value, Some(b"second try".to_vec()));
    }
    assert_eq!(loaded.load(Ordering::SeqCst), 1, "one waiter rebuilds");
    let (value, fence) = stored(&server, "flaky").unwrap();
    assert_eq!(value, b"second try");
    assert!(fence > failed);
    assert!(!exists(&server, &keys("flaky").rebuild.lock));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_whose_reply_was_lost_is_sent_again_and_answers_as_the_first() {
    let (server, proxy, client) = behind_proxy().await;
    let scripts = Scripts::load(&server);
    let direct = Client::connect(&server.url()).await.unwrap();
    direct
        .cached("menu", options(), || async {
            Ok::<_, String>(Some(b"soup".to_vec()))
        })
        .await
        .unwrap();
    let (_, fence) = stored(&server, "menu").unwrap();
    proxy.cut_on(&scripts.read, Cut::AfterForward, 1);
    match client
        .cache("menu", options())
        .unwrap()
        .read()
        .await
        .unwrap()
    {
        Read::Hit(entry) => {
            assert_eq!(entry.value, Some(b"soup".to_vec()));
            assert_eq!(entry.fence, fence);
        }
        Read::Load(_) | Read::Refresh(..) => panic!("a fresh entry is a hit"),
    }
    assert_eq!(proxy.cuts_done(), 1);
    // A miss read through a lost reply: this caller rebuilds, and holds the
    // rebuild lock under the token it was given.
    proxy.cut_on(&scripts.read, Cut::AfterForward, 1);
    let rebuild = loads(&client.cache("specials", options()).unwrap()).await;
    assert_eq!(proxy.cuts_done(), 2);
    let holder: u64 = server
        .conn()
        .hget(&keys("specials").rebuild.lock, "fence")
        .unwrap();
    assert_eq!(holder, rebuild.fence());
    let outcome = rebuild.store(Some(b"stew"), "bytes").await.unwrap();
    assert_eq!(outcome, Stored::Written);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalidation_whose_reply_was_lost_still_deletes_the_entry_and_refuses_the_rebuild_across_it(
) {
    let (server, proxy, client) = behind_proxy().await;
    let scripts = Scripts::load(&server);
    let direct = Client::connect(&server.url()).await.unwrap();
    // An entry stale within its window, refreshed by a rebuild that read the
    // database before the invalidation.
    let stale = CacheOptions::new(Duration::from_millis(100))
        .stale(Some(Duration::from_secs(60)))
        .jitter(0.0)
        .early(0.0);
    let cache = direct.cache("price", stale).unwrap();
    let first = loads(&cache).await;
    let outcome = first.store(Some(b"9.99"), "bytes").await.unwrap();
    assert_eq!(outcome, Stored::Written);
    let refresh = refreshing(&cache).await;
    proxy.cut_on(&scripts.invalidate, Cut::AfterForward, 1);
    // The first send deleted the entry and its resend found none, so the
    // answer may be false: what is promised is what holds after it.
    client.invalidate("price").await.unwrap();
    assert_eq!(proxy.cuts_done(), 1);
    assert_eq!(stored(&server, "price"), None);
    let outcome = refresh.store(Some(b"10.49"), "bytes").await.unwrap();
    assert_eq!(outcome, Stored::Invalidated);
    assert_eq!(
        stored(&server, "price"),
        None,
        "a value older than the invalidation landed"
    );
    // The next rebuild, started after the invalidation, stores.
    let next = loads(&cache).await;
    let outcome = next.store(Some(b"10.99"), "bytes").await.unwrap();
    assert_eq!(outcome, Stored::Written);
}

/// What [`hearing_late`] sets up.
struct LateListener {
    _server: RedisServer,
    _proxy: FaultProxy,
    rebuild: Rebuild,
    waiter: JoinHandle<rlock_core::Result<Option<Vec<u8>>>>,
    loaded: Arc<AtomicU32>,
}

/// A rebuild of `key` in progress on a client straight to the server, and a
/// caller of it (`options`) whose client hears the entry's messages `delay`
/// late; returned once that caller looked at the entry `looks` times, and
/// so went to sleep for the message at least `looks - 1` times.
async fn hearing_late(
    key: &'static str,
    options: CacheOptions,
    delay: Duration,
    looks: usize,
) -> LateListener {
    let (server, proxy, late) = behind_proxy().await;
    let scripts = Scripts::load(&server);
    proxy.delay_pubsub(delay);
    proxy.count(&scripts.read);
    let rebuilding = Client::connect(&server.url()).await.unwrap();
    let rebuild = loads(&rebuilding.cache(key, options.clone()).unwrap()).await;
    let loaded = Arc::new(AtomicU32::new(0));
    let waiter = caller(late, key, &options, &loaded, b"theirs");
    until(|| async { proxy.seen(&scripts.read) >= looks }).await;
    LateListener {
        _server: server,
        _proxy: proxy,
        rebuild,
        waiter,
        loaded,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_that_hears_the_write_late_still_gets_the_value_within_its_timeout() {
    // The rebuilder's lease (30 s) is far beyond the waiter's timeout: only
    // the message, 500 ms late, can bring the value in time. The waiter
    // looked, joined the channel and looked again: it sleeps for it.
    let timeout = Duration::from_secs(5);
    let options = options().timeout(Some(timeout));
    let late = hearing_late("feed", options, Duration::from_millis(500), 2).await;
    let outcome = late.rebuild.store(Some(b"headlines"), "bytes").await;
    assert_eq!(outcome.unwrap(), Stored::Written);
    let value = finished(late.waiter, timeout * 2).await.unwrap();
    assert_eq!(value, Some(b"headlines".to_vec()));
    assert_eq!(
        late.loaded.load(Ordering::SeqCst),
        0,
        "the waiter loaded too"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_that_never_hears_the_write_gets_the_value_within_the_rebuilders_lease() {
    // No message reaches the waiter within this test. By its third look it
    // slept out one lease of the rebuilder (renewed meanwhile) and sleeps
    // again.
    let lease = Duration::from_secs(1);
    let options = options().lock_ttl(lease);
    let deaf = hearing_late("rates", options, Duration::from_secs(120), 3).await;
    let stored_at = Instant::now();
    let outcome = deaf.rebuild.store(Some(b"1.08"), "bytes").await;
    assert_eq!(outcome.unwrap(), Stored::Written);
    let value = finished(deaf.waiter, Duration::from_secs(10))
        .await
        .unwrap();
    let took = stored_at.elapsed();
    assert_eq!(value, Some(b"1.08".to_vec()));
    assert!(
        took <= lease + SLACK,
        "the waiter slept {took:?} past the write, its sleeps are bounded by a {lease:?} lease"
    );
    assert_eq!(
        deaf.loaded.load(Ordering::SeqCst),
        0,
        "the waiter loaded too"
    );
}

/// What a wait bounded by a lease may overrun it by: the bound's own random
/// spread (at most 50 ms), a look at Redis, and this machine's scheduling.
const SLACK: Duration = Duration::from_millis(500);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_take_over_from_a_rebuilder_cut_off_for_good_and_its_late_write_is_refused() {
    let (server, proxy, cut_off) = behind_proxy().await;
    let lease = Duration::from_millis(500);
    let options = options().lock_ttl(lease);
    let old = loads(&cut_off.cache("stock", options.clone()).unwrap()).await;
    let loaded = Arc::new(AtomicU32::new(0));
    let waiters = callers(&server, "stock", &options, 3, &loaded, b"new").await;
    waiting(&server, "stock", 3).await;
    // Its renewals never reach Redis again: its lease ends there.
    let severed = Instant::now();
    proxy.sever();
    for w in waiters {
        let value = finished(w, Duration::from_secs(10)).await.unwrap();
        assert_eq!(value, Some(b"new".to_vec()));
    }
    let took = severed.elapsed();
    assert!(
        took <= lease + SLACK * 2,
        "the waiters took {took:?} to take over from a {lease:?} lease"
    );
    assert_eq!(loaded.load(Ordering::SeqCst), 1, "one new loader runs");
    let (value, fence) = stored(&server, "stock").unwrap();
    assert_eq!(value, b"new");
    assert!(fence > old.fence());
    // Back on the wire, the old rebuild's value is refused.
    proxy.heal();
    let late = old.store(Some(b"old"), "bytes").await.unwrap();
    assert_eq!(late, Stored::LockLost);
    assert_eq!(stored(&server, "stock"), Some((b"new".to_vec(), fence)));
}

/// A rebuild (`first`) whose every renewal was cut before Redis saw it, so
/// that it goes on as if paused past its lease, and the rebuild that took
/// the lock after that lease ended (`second`), on another client.
struct Overtaken {
    server: RedisServer,
    /// Kept bound by each test: the stalled rebuild stores through it.
    _proxy: FaultProxy,
    first: Rebuild,
    second: Rebuild,
}

async fn overtaken(key: &str) -> Overtaken {
    let (server, proxy, stalled) = behind_proxy().await;
    proxy.cut_on(
        &script(&server, "mutex extend"),
        Cut::BeforeForward,
        usize::MAX,
    );
    let options = options().lock_ttl(Duration::from_millis(500));
    let first = loads(&stalled.cache(key, options.clone()).unwrap()).await;
    let lock = keys(key).rebuild.lock;
    until(|| async { !exists(&server, &lock) }).await;
    assert!(proxy.cuts_done() > 0, "no renewal was tried");
    let other = Client::connect(&server.url()).await.unwrap();
    let second = loads(&other.cache(key, options).unwrap()).await;
    assert!(second.fence() > first.fence());
    Overtaken {
        server,
        _proxy: proxy,
        first,
        second,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebuild_past_its_lease_never_overwrites_what_the_next_one_wrote() {
    let Overtaken {
        server,
        _proxy,
        first,
        second,
    } = overtaken("slow-db").await;
    let newer = second.fence();
    let outcome = second.store(Some(b"T2"), "bytes").await.unwrap();
    assert_eq!(outcome, Stored::Written);
    let late = first.store(Some(b"T1"), "bytes").await.unwrap();
    assert!(
        matches!(late, Stored::LockLost | Stored::Newer),
        "an older rebuild's store: {late:?}"
    );
    assert_eq!(stored(&server, "slow-db"), Some((b"T2".to_vec(), newer)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebuild_past_its_lease_cannot_write_while_the_next_one_loads() {
    let Overtaken {
        server,
        _proxy,
        first,
        second,
    } = overtaken("slow-api").await;
    let early = first.store(Some(b"T1"), "bytes").await.unwrap();
    assert_eq!(early, Stored::LockLost);
    assert_eq!(stored(&server, "slow-api"), None);
    let newer = second.fence();
    let outcome = second.store(Some(b"T2"), "bytes").await.unwrap();
    assert_eq!(outcome, Stored::Written);
    assert_eq!(stored(&server, "slow-api"), Some((b"T2".to_vec(), newer)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebuild_lock_whose_release_never_arrived_is_not_renewed_past_its_lease() {
    let (server, proxy, client) = behind_proxy().await;
    let lease = Duration::from_millis(500);
    let rebuild = loads(&client.cache("quote", options().lock_ttl(lease)).unwrap()).await;
    // The write lands; the release after it never reaches Redis, nor does
    // its resend.
    proxy.cut_on(&script(&server, "mutex release"), Cut::BeforeForward, 2);
    let outcome = rebuild.store(Some(b"42"), "bytes").await.unwrap();
    assert_eq!(outcome, Stored::Written);
    assert_eq!(proxy.cuts_done(), 2);
    let lock = keys("quote").rebuild.lock;
    assert!(
        exists(&server, &lock),
        "the release reached Redis after all"
    );
    // Given up by its holder, it ends with its lease: the rebuild after
    // this entry expires is not kept waiting by a lock renewed forever.
    let released = Instant::now();
    until(|| async { !exists(&server, &lock) }).await;
    assert!(
        released.elapsed() <= lease + SLACK,
        "the lock stayed {:?}",
        released.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_never_gets_the_failure_of_a_rebuild_overtaken_past_its_lease() {
    let (server, proxy, zombie) = behind_proxy().await;
    proxy.cut_on(
        &script(&server, "mutex extend"),
        Cut::BeforeForward,
        usize::MAX,
    );
    let options = options().lock_ttl(Duration::from_millis(500));
    let first = loads(&zombie.cache("quotes", options.clone()).unwrap()).await;
    let overtaken = first.fence();
    // Two callers wait for it; once its lease ends one of them rebuilds,
    // its loader held until the overtaken rebuild has failed.
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let mut callers = Vec::new();
    for _ in 0..2 {
        let client = Client::connect(&server.url()).await.unwrap();
        let (options, gate) = (options.clone(), gate.clone());
        callers.push(tokio::spawn(async move {
            client
                .cached("quotes", options, move || async move {
                    let _ = gate.acquire().await;
                    Ok::<_, String>(Some(b"live".to_vec()))
                })
                .await
        }));
    }
    waiting(&server, "quotes", 2).await;
    let lock = keys("quotes").rebuild.lock;
    until(|| async {
        let holder: Option<u64> = server.conn().hget(&lock, "fence").unwrap();
        holder.is_some_and(|f| f > overtaken)
    })
    .await;
    // The overtaken rebuild's loader fails, late.
    first.fail("timed out").await.unwrap();
    gate.add_permits(1);
    for c in callers {
        let value = finished(c, Duration::from_secs(5)).await;
        assert_eq!(value.unwrap(), Some(b"live".to_vec()));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_whose_write_lost_both_replies_still_gets_the_value_its_loader_gave() {
    let (server, proxy, client) = behind_proxy().await;
    let scripts = Scripts::load(&server);
    // The write lands; its reply is lost, and so is its resend's.
    proxy.cut_on(&scripts.write, Cut::AfterForward, 2);
    let value = client
        .cached("twice", options(), || async {
            Ok::<_, String>(Some(b"loaded".to_vec()))
        })
        .await;
    assert_eq!(proxy.cuts_done(), 2);
    assert_eq!(
        stored(&server, "twice").map(|(v, _)| v),
        Some(b"loaded".to_vec())
    );
    assert!(!exists(&server, &keys("twice").rebuild.lock));
    assert_eq!(value.unwrap(), Some(b"loaded".to_vec()));
}

/// A caller waiting for a rebuild that failed holding its lock gets that
/// failure (`on_error` share), even when a newcomer, who never waited for
/// it, starts the next rebuild before the waiter looks again: here the
/// waiter hears the entry's messages 300 ms late.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_gets_the_failure_it_waited_for_though_a_newcomer_rebuilds_before_it_looks() {
    let (server, proxy, late) = behind_proxy().await;
    let scripts = Scripts::load(&server);
    proxy.delay_pubsub(Duration::from_millis(300));
    proxy.count(&scripts.read);
    let share = options()
        .on_error(OnError::Share)
        .timeout(Some(Duration::from_secs(2)));
    let direct = Client::connect(&server.url()).await.unwrap();
    let first = loads(&direct.cache("orders", share.clone()).unwrap()).await;
    let cache = late.cache("orders", share.clone()).unwrap();
    let waiter = tokio::spawn(async move { cache.read().await.err() });
    // Joined the channel, and looked again: asleep for the first's message.
    until(|| async { server.subscribers(&keys("orders").news) == 1 }).await;
    until(|| async { proxy.seen(&scripts.read) >= 2 }).await;
    first.fail("database down").await.unwrap();
    let newcomer = Client::connect(&server.url()).await.unwrap();
    let second = loads(&newcomer.cache("orders", share).unwrap()).await;
    let err = finished(waiter, Duration::from_secs(6)).await;
    let _ = second.store(Some(b"late"), "bytes").await;
    match err {
        Some(Error::LoaderFailed { message, .. }) => assert_eq!(message, "database down"),
        other => panic!("the waiter did not get the failure it waited for: {other:?}"),
    }
}

/// A waiter's `timeout` bounds its whole wait: on a wire whose replies come
/// 1 s late, the look after its deadline is not made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_on_a_slow_wire_answers_at_its_deadline_not_a_look_later() {
    let (server, proxy, slow) = behind_proxy().await;
    let scripts = Scripts::load(&server);
    let timeout = Duration::from_millis(1200);
    let options = options().timeout(Some(timeout));
    let direct = Client::connect(&server.url()).await.unwrap();
    let held = loads(&direct.cache("slow", options.clone()).unwrap()).await;
    // Connected, and the scripts known, before the wire slows down.
    let warm = loads(&slow.cache("warm", options.clone()).unwrap()).await;
    warm.store(Some(b"w"), "bytes").await.unwrap();
    proxy.count(&scripts.read);
    proxy.delay_replies(Duration::from_secs(1));
    let cache = slow.cache("slow", options).unwrap();
    let started = Instant::now();
    let read = tokio::time::timeout(Duration::from_secs(10), cache.read())
        .await
        .expect("the read never ended");
    let took = started.elapsed();
    assert!(
        matches!(read, Err(Error::Timeout { .. })),
        "{:?}",
        read.err()
    );
    assert!(
        took <= timeout + Duration::from_millis(300),
        "a {timeout:?} timeout answered after {took:?}, {} looks",
        proxy.seen(&scripts.read)
    );
    let _ = held.store(Some(b"x"), "bytes").await;
}

/// A read given up while its attempt at the rebuild lock is on its way: the
/// grant that lands is given back and the callers that saw that rebuild in
/// progress are told at once, not left asleep for its lease (10 s here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_given_up_while_taking_the_rebuild_lock_wakes_those_who_saw_it() {
    let (server, proxy, cancelled) = behind_proxy().await;
    Scripts::load(&server);
    let lease = Duration::from_secs(10);
    let options = options().lock_ttl(lease);
    let warm = loads(&cancelled.cache("warm", options.clone()).unwrap()).await;
    warm.store(Some(b"w"), "bytes").await.unwrap();
    proxy.delay_replies(Duration::from_millis(400));
    let cache = cancelled.cache("menu", options.clone()).unwrap();
    let reader = tokio::spawn(async move { cache.read().await.map(|_| ()) });
    let lock = keys("menu").rebuild.lock;
    until(|| async { exists(&server, &lock) }).await;
    reader.abort();
    // Another client sees the rebuild in progress, and waits for it.
    let direct = Client::connect(&server.url()).await.unwrap();
    let cache = direct.cache("menu", options).unwrap();
    let started = Instant::now();
    let waiter = tokio::spawn(async move { cache.read().await.ok() });
    let read = finished(waiter, lease + Duration::from_secs(5)).await;
    let took = started.elapsed();
    let Some(Read::Load(rebuild)) = read else {
        panic!("the waiter did not load the entry the given-up read left");
    };
    // The grant's reply comes 0.4 s late, the lock's giving back as late.
    assert!(
        took <= Duration::from_secs(3),
        "the waiter slept {took:?} of the given-up rebuild's {lease:?} lease"
    );
    assert_eq!(
        rebuild.store(Some(b"soup"), "bytes").await.unwrap(),
        Stored::Written
    );
}
