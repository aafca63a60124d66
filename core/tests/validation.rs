//! Bad input gets a typed error before any I/O; connection failures are
//! connection errors that never show a password.

use std::time::{Duration, Instant};

use rlock_core::{
    validate, Client, ClientOptions, Error, LockArgs, LockOptions, OptionName, Unit, Wait,
};
use rlock_test_support::RedisServer;

fn is_invalid<T: std::fmt::Debug>(r: Result<T, Error>) -> bool {
    matches!(r, Err(Error::InvalidArgument(_)))
}

/// The option the check of `args` refused, if it refused one.
fn refused(args: LockArgs) -> Option<OptionName> {
    match args.check() {
        Err(Error::InvalidArgument(invalid)) => invalid.option,
        _ => None,
    }
}

#[tokio::test]
async fn every_bad_argument_is_refused_before_any_io() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let mut monitor = redis.monitor();

    assert!(is_invalid(client.lock("")));
    assert!(is_invalid(client.lock("}starts-with-brace")));
    assert!(is_invalid(
        client.lock(&"x".repeat(validate::MAX_NAME_BYTES + 1))
    ));
    assert!(!is_invalid(client.lock(&"x".repeat(64 * 1024))));
    let seconds = LockArgs::new(Unit::Seconds);
    let millis = LockArgs::new(Unit::Millis);
    // 1 and 9 ms: below the shortest lease that can be counted as held.
    for ttl in [
        0.0,
        -1.0,
        f64::NAN,
        f64::INFINITY,
        400.0 * 24.0 * 3600.0,
        0.001,
        0.009,
    ] {
        assert_eq!(
            refused(LockArgs {
                ttl: Some(ttl),
                ..seconds
            }),
            Some(OptionName::Ttl),
            "ttl {ttl}"
        );
        assert_eq!(
            refused(LockArgs {
                ttl: Some(ttl * 1000.0),
                ..millis
            }),
            Some(OptionName::Ttl),
            "ttl {ttl} s in milliseconds"
        );
    }
    for max_hold in [0.0, -5.0, f64::NAN] {
        let args = LockArgs {
            max_hold: Some(max_hold),
            ..seconds
        };
        assert_eq!(
            refused(args),
            Some(OptionName::MaxHold),
            "max_hold {max_hold}"
        );
    }
    for timeout in [-0.001, f64::NAN, f64::NEG_INFINITY, f64::INFINITY] {
        let args = LockArgs {
            timeout: Some(timeout),
            ..seconds
        };
        assert_eq!(
            refused(args),
            Some(OptionName::Timeout),
            "timeout {timeout}"
        );
    }
    for replicas in [0.0, -1.0, 1.5, 101.0, f64::NAN] {
        let args = LockArgs {
            sync_replicas: Some(replicas),
            ..millis
        };
        assert_eq!(
            refused(args),
            Some(OptionName::SyncReplicas),
            "sync_replicas {replicas}"
        );
    }
    for queue_after in [-0.001, f64::NAN, f64::INFINITY, 400.0 * 24.0 * 3600.0] {
        assert_eq!(
            refused(LockArgs {
                queue_after: Some(queue_after),
                ..seconds
            }),
            Some(OptionName::QueueAfter),
            "queue_after {queue_after}"
        );
        let err = LockArgs {
            queue_after: Some(queue_after * 1000.0),
            ..millis
        }
        .check()
        .unwrap_err();
        // The message names the option; each face spells it its own way.
        assert!(err.to_string().contains("queue_after"), "{err}");
        let Error::InvalidArgument(invalid) = err else {
            panic!("{err:?}")
        };
        let spelled = invalid.spelled(|_| "queueAfterMs");
        assert!(spelled.starts_with("queueAfterMs must be"), "{spelled}");
    }
    assert_eq!(
        seconds.check().unwrap(),
        (LockOptions::default(), Wait::Forever),
        "unset: the defaults"
    );
    let (options, _) = LockArgs {
        queue_after: Some(250.0),
        sync_replicas: Some(2.0),
        ..millis
    }
    .check()
    .unwrap();
    assert_eq!(options.queue_after, Duration::from_millis(250));
    assert_eq!(options.sync_replicas, Some(2));
    let not_blocking = LockArgs {
        blocking: false,
        timeout: Some(5.0),
        ..seconds
    };
    assert_eq!(not_blocking.wait().unwrap(), Wait::Once);
    let no_wait = LockArgs {
        timeout: Some(0.0),
        ..millis
    };
    assert_eq!(no_wait.wait().unwrap(), Wait::Once);
    assert!(is_invalid(
        client.lock_with("x", LockOptions::default().ttl(Duration::ZERO))
    ));
    let lock = client.lock("x").unwrap();
    assert!(is_invalid(lock.extend(Some(Duration::ZERO)).await));

    for prefix in ["", "has space", "br{ace", "tab\t"] {
        let r = Client::connect_with(&redis.url(), ClientOptions::default().prefix(prefix)).await;
        assert!(is_invalid(r), "prefix {prefix:?}");
    }
    for url in [
        "",
        "not a url",
        "http://127.0.0.1:6379",
        "redis://",
        "redis://127.0.0.1:6379/notadb",
    ] {
        assert!(is_invalid(Client::connect(url).await), "url {url:?}");
    }
    let sent = monitor.mark();
    assert!(sent.is_empty(), "nothing reached Redis: {sent:?}");
    let keys = redis.data_keys();
    assert!(keys.is_empty(), "{keys:?}");
}

#[tokio::test]
async fn an_unreachable_server_is_a_fast_connection_error() {
    // A port nothing listens on: take a free one and leave it closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let start = Instant::now();
    let err = Client::connect(&format!("redis://127.0.0.1:{port}"))
        .await
        .unwrap_err();
    assert_eq!(err.category(), "connection", "{err:?}");
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "{:?}",
        start.elapsed()
    );
}

#[tokio::test]
async fn a_wrong_password_is_a_connection_error_that_never_shows_it() {
    let redis = RedisServer::start_with(&["--requirepass", "right-horse-battery"]);
    let secret = "WrongStaple%2F42";
    let url = format!("redis://:{secret}@127.0.0.1:{}", redis.port);
    let err = Client::connect(&url).await.unwrap_err();
    assert_eq!(err.category(), "connection", "{err:?}");
    let shown = format!("{err} {err:?}");
    assert!(!shown.contains("WrongStaple"), "{shown}");

    let good = format!("redis://:right-horse-battery@127.0.0.1:{}", redis.port);
    let client = Client::connect(&good).await.unwrap();
    let shown = format!("{client:?} {}", client.server());
    assert!(!shown.contains("right-horse-battery"), "{shown}");
    client
        .lock("ok")
        .unwrap()
        .acquire(Wait::Once)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_database_number_in_the_url_is_used() {
    let redis = RedisServer::start();
    let client = Client::connect(&format!("{}/3", redis.url()))
        .await
        .unwrap();
    client
        .lock("db")
        .unwrap()
        .acquire(Wait::Once)
        .await
        .unwrap();
    let mut c = redis.conn();
    let _: () = redis::cmd("SELECT").arg(3).query(&mut c).unwrap();
    let n: i64 = redis::cmd("EXISTS")
        .arg("rlock:{db}")
        .query(&mut c)
        .unwrap();
    assert_eq!(n, 1);
}

#[tokio::test]
async fn a_lease_too_short_to_hold_is_refused_with_the_least_usable_value() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let mut monitor = redis.monitor();
    let too_short = client.lock_with("tiny", LockOptions::default().ttl(Duration::from_millis(1)));
    let message = too_short.unwrap_err().to_string();
    assert!(message.contains("at least 10 ms"), "{message}");
    let seconds = LockArgs {
        ttl: Some(0.005),
        ..LockArgs::new(Unit::Seconds)
    };
    let message = seconds.check().unwrap_err().to_string();
    assert!(
        message.contains("at least 10 ms") && message.contains("0.005 s"),
        "{message}"
    );
    assert!(monitor.mark().is_empty(), "sent before refusing");
    // The shortest accepted lease takes a free lock (a reply later than its
    // 7.9 ms only makes it try again).
    let shortest = client
        .lock_with(
            "tiny",
            LockOptions::default().ttl(Duration::from_millis(10)),
        )
        .unwrap();
    shortest
        .acquire(Wait::For(Duration::from_secs(10)))
        .await
        .unwrap();
}
