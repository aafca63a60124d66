//! Security: TLS that refuses what it cannot verify, a least-privilege ACL
//! user that can use every feature, passwords that never show, owner ids from
//! the OS CSPRNG, and names that are only ever keys.

use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::Commands;
use rlock_core::{CacheOptions, Client, ClientOptions, Error, LockOptions, Read, Stored, Wait};
use rlock_test_support::{eventually, RedisServer};

// ---------------------------------------------------------------------------
// TLS
// ---------------------------------------------------------------------------

#[tokio::test]
async fn a_server_certificate_from_an_unknown_ca_is_refused_with_a_connection_error() {
    let redis = RedisServer::start_tls();
    // The server is sound: a client that trusts its CA is served over TLS.
    let pong: String = redis::cmd("PING").query(&mut redis.conn()).unwrap();
    assert_eq!(pong, "PONG");

    let started = Instant::now();
    let err = Client::connect(&redis.url()).await.unwrap_err();
    assert_eq!(err.category(), "connection", "{err:?}");
    let text = err.to_string().to_lowercase();
    assert!(text.contains("certificate"), "not a clear reason: {err}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn rediss_with_the_servers_ca_trusted_takes_waits_and_renews_locks() {
    let redis = RedisServer::start_tls();
    let ca = redis.tls_ca_pem().unwrap().to_vec();
    let options = ClientOptions::default().tls_ca_pem(Some(ca.clone()));
    let client = Client::connect_with(&redis.url(), options.clone())
        .await
        .unwrap();
    let lock = client
        .lock_with(
            "tls",
            LockOptions::default().ttl(Duration::from_millis(300)),
        )
        .unwrap();
    lock.acquire(Wait::Once).await.unwrap();
    // A waiter on a second client is woken over the TLS pub/sub connection.
    let other = Client::connect_with(&redis.url(), options).await.unwrap();
    let waiter = other.lock("tls").unwrap();
    let waiting =
        tokio::spawn(async move { waiter.acquire(Wait::For(Duration::from_secs(10))).await });
    assert!(
        eventually(Duration::from_secs(5), || redis
            .subscribers("rlock:{tls}:released")
            == 1)
        .await
    );
    tokio::time::sleep(Duration::from_millis(500)).await; // renewals over TLS keep it
    assert_eq!(lock.lost(), None);
    lock.release().await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .unwrap()
        .unwrap()
        .unwrap();

    // A CA for a URL without TLS is a mistake, refused before any I/O.
    let plain = redis.url().replace("rediss://", "redis://");
    let err = Client::connect_with(&plain, ClientOptions::default().tls_ca_pem(Some(ca)))
        .await
        .unwrap_err();
    assert_eq!(err.category(), "bad input", "{err:?}");
}

#[tokio::test]
async fn certificate_checks_cannot_be_turned_off_through_the_url() {
    let redis = RedisServer::start_tls();
    let url = format!("{}/#insecure", redis.url());
    let err = Client::connect(&url).await.unwrap_err();
    assert!(
        matches!(err, Error::Connection(_) | Error::InvalidArgument(_)),
        "{err:?}"
    );
}

#[tokio::test]
async fn plain_redis_on_a_tls_port_fails_fast_with_a_connection_error() {
    let redis = RedisServer::start_tls();
    let url = redis.url().replace("rediss://", "redis://");
    let started = Instant::now();
    let err = Client::connect(&url).await.unwrap_err();
    assert_eq!(err.category(), "connection", "{err:?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

// ---------------------------------------------------------------------------
// ACL
// ---------------------------------------------------------------------------

/// Everything a client of the core needs, and nothing more (each one is
/// needed by some step of `every_feature`): the lock keys and release
/// channels under the prefix, EVALSHA with its NOSCRIPT fallback (EVAL
/// of the script itself), pub/sub for waiting, and the commands the scripts run, which ACL
/// checks too.
const LOCKER_RULES: &[&str] = &[
    "~rlock:*",
    "&rlock:*",
    "+evalsha",
    "+eval",
    "+subscribe",
    "+unsubscribe",
    "+exists",
    "+type",
    "+hget",
    "+hmget",
    "+hset",
    "+hincrby",
    "+incr",
    "+get",
    "+set",
    "+pexpire",
    "+pttl",
    "+del",
    "+publish",
    "+lindex",
    "+llen",
    "+hsetnx",
    "+rpush",
    "+lpop",
    "+hdel",
    "+lrem",
    "+pubsub|numsub",
    // The read-write lock's and semaphore's scripts (`core/lua/many/`).
    "+time",
    "+zadd",
    "+zrange",
    "+zrangebyscore",
    "+zrem",
    "+zscore",
    "+zcard",
    "+lrange",
    "+hexists",
];

const LOCKER_PASSWORD: &str = "locker-Pa55word";

/// The ids of the connections subscribed to something.
fn pubsub_connections(redis: &RedisServer) -> Vec<String> {
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .arg("TYPE")
        .arg("pubsub")
        .query(&mut redis.conn())
        .unwrap();
    list.lines()
        .filter_map(|l| l.strip_prefix("id="))
        .filter_map(|l| l.split(' ').next())
        .map(str::to_owned)
        .collect()
}

fn still_connected(redis: &RedisServer, id: &str) -> bool {
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .arg("ID")
        .arg(id)
        .query(&mut redis.conn())
        .unwrap();
    !list.trim().is_empty()
}

fn flush_scripts(redis: &RedisServer) {
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query(&mut redis.conn())
        .unwrap();
}

/// Every feature of the core as the user `url` names, on a server whose
/// script cache is empty (so the NOSCRIPT fallbacks run too).
async fn every_feature(redis: &RedisServer, url: &str) -> Result<(), String> {
    flush_scripts(redis);
    let holder = Client::connect(url).await.map_err(|e| e.to_string())?;
    let other = Client::connect(url).await.map_err(|e| e.to_string())?;
    let e = |what: &'static str| move |err: Error| format!("{what}: {err}");

    // A fence counter an earlier build left for a name is folded into its
    // slot's counter (raised to it) at the name's next token.
    let legacy = holder.lock("acl-legacy").unwrap();
    let _: () = redis
        .conn()
        .set(&legacy.keys().legacy_fence, 1_000_000)
        .unwrap();
    let token = legacy
        .acquire(Wait::Once)
        .await
        .map_err(e("acquire past a legacy counter"))?
        .fencing_token;
    if token != 1_000_001 {
        return Err(format!("legacy fold: token {token}"));
    }
    legacy
        .release()
        .await
        .map_err(e("release past a legacy counter"))?;

    // Acquire, re-enter, state, extend.
    let lock = holder
        .lock_with("acl", LockOptions::default().ttl(Duration::from_secs(20)))
        .unwrap();
    let held = lock.acquire(Wait::Once).await.map_err(e("acquire"))?;
    lock.acquire(Wait::Once).await.map_err(e("re-acquire"))?;
    let state = lock.state().await.map_err(e("state"))?;
    if !(state.held && state.count == 2 && state.fence == Some(held.fencing_token)) {
        return Err(format!("state: {state:?}"));
    }
    lock.extend(Some(Duration::from_secs(25)))
        .await
        .map_err(e("extend"))?;

    // A waiter of another client is woken by the release message: the
    // lease had 25 s left, so nothing else explains a wake this soon.
    let waiter = other.lock("acl").unwrap();
    let waiting = tokio::spawn({
        let waiter = waiter.clone();
        async move { waiter.acquire(Wait::For(Duration::from_secs(15))).await }
    });
    let channel = &lock.keys().channel;
    if !eventually(Duration::from_secs(5), || redis.subscribers(channel) == 1).await {
        return Err("the waiter could not subscribe".into());
    }
    let pubsub = pubsub_connections(redis);
    lock.release().await.map_err(e("nested release"))?;
    lock.release().await.map_err(e("release"))?;
    let woken = tokio::time::timeout(Duration::from_secs(5), waiting).await;
    woken
        .map_err(|_| "the waiter was not woken by the release".to_string())?
        .unwrap()
        .map_err(e("woken waiter"))?;
    waiter.release().await.map_err(e("waiter release"))?;
    if !eventually(Duration::from_secs(5), || redis.subscribers(channel) == 0).await {
        return Err("the subscription outlived the last waiter".into());
    }
    // Left by UNSUBSCRIBE, not by dropping the connection.
    if pubsub.is_empty() || !pubsub.iter().all(|id| still_connected(redis, id)) {
        return Err(format!("the pub/sub connection {pubsub:?} was dropped"));
    }

    // Fair mode: a queued waiter is handed the lock by the release; one that
    // gives up leaves the line.
    let fair = LockOptions::default()
        .ttl(Duration::from_secs(20))
        .fair(true);
    let first = holder.lock_with("acl-fair", fair.clone()).unwrap();
    let first_token = first
        .acquire(Wait::Once)
        .await
        .map_err(e("fair acquire"))?
        .fencing_token;
    let queued = other.lock_with("acl-fair", fair.clone()).unwrap();
    let waiting = tokio::spawn({
        let queued = queued.clone();
        async move { queued.acquire(Wait::For(Duration::from_secs(15))).await }
    });
    let mut in_line = 0;
    for _ in 0..500 {
        in_line = first.state().await.map_err(e("fair state"))?.waiting;
        if in_line == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    if in_line != 1 {
        return Err(format!("the fair waiter never queued ({in_line})"));
    }
    let quitter = other.lock_with("acl-fair", fair).unwrap();
    match quitter.acquire(Wait::For(Duration::from_millis(300))).await {
        Err(Error::Timeout { .. }) => {}
        other => return Err(format!("quitter: {other:?}")),
    }
    let after = first.state().await.map_err(e("fair state"))?.waiting;
    if after != 1 {
        return Err(format!(
            "the waiter that gave up is still in line ({after})"
        ));
    }
    first.release().await.map_err(e("fair release"))?;
    let handed = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .map_err(|_| "the fair waiter was not handed the lock".to_string())?
        .unwrap()
        .map_err(e("handed"))?;
    if handed.fencing_token <= first_token {
        return Err(format!(
            "handoff token {} after {first_token}",
            handed.fencing_token
        ));
    }
    queued.release().await.map_err(e("fair waiter release"))?;

    // The watchdog renews a short lease, again from an empty script cache.
    flush_scripts(redis);
    let renewed = holder
        .lock_with(
            "acl-renewed",
            LockOptions::default().ttl(Duration::from_millis(600)),
        )
        .unwrap();
    renewed.acquire(Wait::Once).await.map_err(e("acquire"))?;
    flush_scripts(redis);
    let key = renewed.keys().lock.clone();
    let mut conn = redis.conn();
    let (mut last, mut renewals) = (i64::MAX, 0);
    let kept = eventually(Duration::from_secs(5), || {
        let left: i64 = conn.pttl(&key).unwrap();
        if left > last {
            renewals += 1;
        }
        last = left;
        left <= 0 || renewals >= 3
    })
    .await;
    if !kept || renewals < 3 || renewed.lost().is_some() {
        return Err(format!("renewals: {renewals}, lost: {:?}", renewed.lost()));
    }
    renewed.release().await.map_err(e("release renewed"))?;
    shared_features(&holder, &other).await?;
    cache_features(redis, &holder, &other).await
}

/// The read-write lock and the semaphore: a writer waits for a reader, a
/// reader behind a waiting writer gives up, the release hands the write
/// over; a semaphore holding is renewed and its state read.
async fn shared_features(holder: &Client, other: &Client) -> Result<(), String> {
    let e = |what: &'static str| move |err: Error| format!("{what}: {err}");
    let options = LockOptions::default().ttl(Duration::from_secs(20));
    let reading = holder.rw_lock("acl-rw", options.clone()).unwrap();
    reading
        .read()
        .acquire(Wait::Once)
        .await
        .map_err(e("read"))?;
    let writer = other.rw_lock("acl-rw", options.clone()).unwrap();
    let writing = tokio::spawn({
        let writer = writer.clone();
        async move {
            writer
                .write()
                .acquire(Wait::For(Duration::from_secs(15)))
                .await
        }
    });
    let mut waiting = 0;
    for _ in 0..500 {
        waiting = reading.state().await.map_err(e("rw state"))?.waiting;
        if waiting == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    if waiting != 1 {
        return Err(format!("the writer never queued ({waiting})"));
    }
    let late = holder.rw_lock("acl-rw", options.clone()).unwrap();
    match late
        .read()
        .acquire(Wait::For(Duration::from_millis(200)))
        .await
    {
        Err(Error::Timeout { .. }) => {}
        other => return Err(format!("a reader behind a waiting writer: {other:?}")),
    }
    reading.read().release().await.map_err(e("read release"))?;
    tokio::time::timeout(Duration::from_secs(5), writing)
        .await
        .map_err(|_| "the writer was not handed the lock".to_string())?
        .unwrap()
        .map_err(e("write"))?;
    writer.write().release().await.map_err(e("write release"))?;

    let sem = holder
        .semaphore(
            "acl-sem",
            2,
            LockOptions::default().ttl(Duration::from_millis(600)),
        )
        .unwrap();
    sem.acquire(1, Wait::Once).await.map_err(e("permit"))?;
    tokio::time::sleep(Duration::from_millis(900)).await;
    if sem.lock().lost().is_some() || sem.held().await.map_err(e("held"))? != 1 {
        return Err(format!(
            "the permit was not renewed: {:?}",
            sem.lock().lost()
        ));
    }
    sem.release().await.map_err(e("permit release"))?;
    Ok(())
}

/// `cached`: a failed load told to a waiter, a load, a hit, an
/// invalidation overtaking a rebuild.
async fn cache_features(
    redis: &RedisServer,
    holder: &Client,
    other: &Client,
) -> Result<(), String> {
    let e = |what: &'static str| move |err: Error| format!("{what}: {err}");
    let options = CacheOptions::new(Duration::from_secs(60));
    let cache = holder.cache("acl-cache", options.clone()).unwrap();
    let Read::Load(failing) = cache.read().await.map_err(e("cache miss"))? else {
        return Err("a cold entry was not for this caller to load".into());
    };
    let waiting = {
        let other = other.clone();
        let options = options.clone();
        tokio::spawn(async move {
            other
                .cached("acl-cache", options, || async { Ok::<_, String>(None) })
                .await
        })
    };
    tokio::time::timeout(Duration::from_secs(5), async {
        while redis.subscribers("rlock:{acl-cache}:cached:news") == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .map_err(|_| "the cache waiter never subscribed".to_string())?;
    failing.fail("down").await.map_err(e("cache fail"))?;
    match tokio::time::timeout(Duration::from_secs(5), waiting).await {
        Ok(Ok(Err(Error::LoaderFailed { .. }))) => {}
        other => return Err(format!("the waiter missed the failure: {other:?}")),
    }
    let loaded = holder
        .cached("acl-cache", options.clone(), || async {
            Ok::<_, String>(Some(b"v".to_vec()))
        })
        .await
        .map_err(e("cache load"))?;
    let hit = other
        .cached("acl-cache", options.clone(), || async {
            Ok::<_, String>(Some(b"never".to_vec()))
        })
        .await
        .map_err(e("cache hit"))?;
    if loaded != hit {
        return Err(format!("a hit read {hit:?}, not {loaded:?}"));
    }
    holder
        .invalidate("acl-cache")
        .await
        .map_err(e("invalidate"))?;
    let Read::Load(overtaken) = cache.read().await.map_err(e("cache reload"))? else {
        return Err("an invalidated entry was not for this caller to load".into());
    };
    holder
        .invalidate("acl-cache")
        .await
        .map_err(e("invalidate"))?;
    match overtaken.store(Some(b"old"), "bytes").await {
        Ok(Stored::Invalidated) => Ok(()),
        other => Err(format!("an overtaken rebuild's write: {other:?}")),
    }
}

#[tokio::test]
async fn a_user_limited_to_the_lock_keys_and_commands_can_use_every_feature() {
    let redis = RedisServer::start();
    redis.add_user("locker", LOCKER_PASSWORD, LOCKER_RULES);
    let url = redis.url_as("locker", LOCKER_PASSWORD);
    every_feature(&redis, &url).await.unwrap();

    // The user is limited: other keys, channels and commands are refused.
    let mut conn = redis::Client::open(url.as_str())
        .unwrap()
        .get_connection()
        .unwrap();
    let other_key: redis::RedisResult<Option<String>> = conn.get("app:data");
    assert!(other_key.is_err(), "read a key outside rlock:*");
    let flush: redis::RedisResult<()> = redis::cmd("FLUSHALL").query(&mut conn);
    assert!(flush.is_err(), "ran FLUSHALL");
    let publish: redis::RedisResult<i64> = conn.publish("app:news", "x");
    assert!(publish.is_err(), "published outside rlock:*");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_rule_of_that_user_is_needed() {
    let mut tours = tokio::task::JoinSet::new();
    for (i, &rule) in LOCKER_RULES.iter().enumerate() {
        let mut rules = LOCKER_RULES.to_vec();
        rules.remove(i);
        tours.spawn(async move {
            let redis = RedisServer::start();
            redis.add_user("locker", LOCKER_PASSWORD, &rules);
            let url = redis.url_as("locker", LOCKER_PASSWORD);
            let tour = tokio::time::timeout(Duration::from_secs(30), every_feature(&redis, &url));
            (rule, tour.await)
        });
    }
    while let Some(done) = tours.join_next().await {
        let (rule, tour) = done.unwrap();
        let tour = tour.unwrap_or_else(|_| panic!("the tour without {rule} hung"));
        assert!(tour.is_err(), "every feature works without {rule}");
    }
}

// ---------------------------------------------------------------------------
// Passwords
// ---------------------------------------------------------------------------

/// Collects every span and event field the core logs, as text.
#[derive(Clone, Default)]
struct LogCapture(Arc<Mutex<String>>);

struct Fields<'a>(&'a mut String);

impl tracing::field::Visit for Fields<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        let _ = write!(self.0, "{}={:?} ", field.name(), value);
    }
}

impl tracing::Subscriber for LogCapture {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, span: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        span.record(&mut Fields(&mut self.0.lock().unwrap()));
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, values: &tracing::span::Record<'_>) {
        values.record(&mut Fields(&mut self.0.lock().unwrap()));
    }
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut text = self.0.lock().unwrap();
        text.push_str(event.metadata().target());
        text.push(' ');
        event.record(&mut Fields(&mut text));
        text.push('\n');
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

#[tokio::test]
async fn a_password_never_shows_in_an_error_a_debug_form_or_a_log_line() {
    let logs = LogCapture::default();
    // The test runs on one thread, so every task the core spawns logs here.
    let _guard = tracing::subscriber::set_default(logs.clone());
    // tracing caches whether a log line is wanted, process-wide, when a line
    // first runs; with one subscriber registered it asks only the running
    // thread's (none, in a sibling test). A second live one makes it ask all.
    let _anchor = tracing::Dispatch::new(LogCapture::default());
    tracing::callsite::rebuild_interest_cache();
    let redis = RedisServer::start();
    let password = "s3cret pa55/w@rd";
    redis.add_user("locker", password, LOCKER_RULES);
    let good = redis.url_as("locker", password);
    let encoded = good
        .split_once("locker:")
        .and_then(|(_, rest)| rest.split_once('@'))
        .map(|(p, _)| p.to_owned())
        .unwrap();
    assert_ne!(encoded, password, "the URL carries it percent-encoded");
    let wrong_password = "wr0ng pa55/w@rd";
    let wrong = redis.url_as("locker", wrong_password);
    let unknown = redis.url_as("nobody", password);

    let mut shown = String::new();
    for url in [&wrong, &unknown] {
        let err = Client::connect(url).await.unwrap_err();
        assert_eq!(err.category(), "connection", "{err:?}");
        let _ = write!(shown, "{err} {err:?} ");
    }
    let client = Client::connect(&good).await.unwrap();
    let lock = client.lock("secret-test").unwrap();
    lock.acquire(Wait::Once).await.unwrap();
    lock.release().await.unwrap();
    let _ = write!(shown, "{client:?} {} {lock:?}", client.server());
    assert!(client.server().contains("***"), "{}", client.server());

    let logged = logs.0.lock().unwrap().clone();
    assert!(
        logged.contains("connected"),
        "the core's logs were captured: {logged}"
    );
    for secret in [password, wrong_password, encoded.as_str()] {
        assert!(!shown.contains(secret), "{secret:?} shown in: {shown}");
        assert!(!logged.contains(secret), "{secret:?} logged in: {logged}");
    }
}

// ---------------------------------------------------------------------------
// Owner ids and names
// ---------------------------------------------------------------------------

#[tokio::test]
async fn owner_ids_carry_a_random_uuid_v4_per_client() {
    let redis = RedisServer::start();
    let mut ids = Vec::new();
    for _ in 0..3 {
        let client = Client::connect(&redis.url()).await.unwrap();
        let id = client.id().to_owned();
        let uuid = uuid::Uuid::parse_str(&id).unwrap();
        assert_eq!(uuid.get_version_num(), 4, "{id}");
        assert_eq!(uuid.get_variant(), uuid::Variant::RFC4122, "{id}");
        assert_eq!(&id[14..15], "4", "version nibble of {id}");
        assert!("89ab".contains(&id[19..20]), "variant bits of {id}");

        let lock = client
            .lock_as("owned", LockOptions::default(), "unit-7")
            .unwrap();
        assert_eq!(lock.owner(), format!("{id}:unit-7"));
        lock.acquire(Wait::Once).await.unwrap();
        let stored: String = redis.conn().hget("rlock:{owned}", "owner").unwrap();
        assert_eq!(stored, lock.owner());
        lock.release().await.unwrap();
        ids.push(id);
    }
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 3, "two clients shared an id: {ids:?}");
}

/// Counts the scripts Redis has cached: one per distinct script text.
fn cached_scripts(redis: &RedisServer) -> u64 {
    redis
        .info("memory")
        .lines()
        .find_map(|l| l.strip_prefix("number_of_cached_scripts:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn names_that_look_like_lua_are_only_keys_and_never_become_code() {
    let redis = RedisServer::start();
    let _: () = redis.conn().set("app:data", "still here").unwrap();
    let client = Client::connect(&redis.url()).await.unwrap();
    let warm = client.lock("plain").unwrap();
    warm.acquire(Wait::Once).await.unwrap();
    warm.extend(None).await.unwrap();
    warm.state().await.unwrap();
    warm.release().await.unwrap();
    let scripts = cached_scripts(&redis);

    let names = [
        "]] redis.call('FLUSHALL') --",
        "'); redis.call('FLUSHALL'); --",
        "\"); redis.call('DEL', 'app:data') --",
        "]]..redis.call('SET','app:data','owned')..[[",
        "\r\nFLUSHALL\r\n",
        "*1\r\n$8\r\nFLUSHALL\r\n",
        "KEYS[1]",
        "ARGV[1]",
    ];
    let mut observer = redis.conn();
    let mut monitor = redis.monitor();
    for name in names {
        let lock = client.lock(name).unwrap();
        lock.acquire(Wait::Once).await.unwrap();
        let key = format!("rlock:{{{name}}}");
        let owner: String = observer.hget(&key, "owner").unwrap();
        assert_eq!(owner, lock.owner(), "{name:?} is the key, verbatim");
        assert!(lock.state().await.unwrap().held);
        lock.extend(None).await.unwrap();
        assert_eq!(lock.release().await.unwrap(), 0);
    }
    // What the core sent (the test's own reads aside): only EVALSHA of the
    // fixed scripts, never a script text.
    let sent = monitor.mark();
    let core: Vec<&String> = sent.iter().filter(|c| *c != "hget").collect();
    assert_eq!(core.len(), 4 * names.len(), "{sent:?}");
    assert!(core.iter().all(|c| *c == "evalsha"), "{sent:?}");
    assert_eq!(cached_scripts(&redis), scripts, "no script text per name");
    let data: String = redis.conn().get("app:data").unwrap();
    assert_eq!(data, "still here");
    let keys = redis.data_keys();
    assert_eq!(keys.len(), 1 + 1 + names.len(), "{keys:?}");
}
