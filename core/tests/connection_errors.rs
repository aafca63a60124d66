//! A connection error names the server it happened at, as `host:port`, and
//! never the password the URL carried.

use std::time::Duration;

use rlock_core::{Client, ClientOptions, Error, Wait};
use rlock_test_support::{free_port, Masters};

/// `err` is a connection error at `server`, without the URL's password.
fn names(err: Error, server: &str) {
    let message = err.to_string();
    assert!(matches!(err, Error::Connection(_)), "{err:?}");
    assert!(
        message.starts_with(&format!("redis connection error: {server}: ")),
        "{message}"
    );
    assert!(!message.contains("hunter2"), "{message}");
}

#[tokio::test]
async fn a_server_that_refuses_the_connection_is_named_without_the_password() {
    let port = free_port();
    let err = Client::connect(&format!("redis://:hunter2@127.0.0.1:{port}/0"))
        .await
        .unwrap_err();
    names(err, &format!("127.0.0.1:{port}"));
}

#[tokio::test]
async fn a_dead_redlock_master_is_named_where_its_failure_surfaces() {
    let masters = Masters::start(2);
    let dead = free_port();
    let mut urls = masters.urls();
    urls.push(format!("redis://:hunter2@127.0.0.1:{dead}"));
    let options = || ClientOptions::default().node_timeout(Duration::from_millis(300));
    let holder = Client::connect_urls(&urls, options()).await.unwrap();
    let rival = Client::connect_urls(&urls, options()).await.unwrap();
    holder
        .lock("report")
        .unwrap()
        .acquire(Wait::Once)
        .await
        .unwrap();

    // Busy on the live masters: the attempt's cause lists the dead one.
    let err = rival
        .lock("report")
        .unwrap()
        .acquire(Wait::Once)
        .await
        .unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, Error::Timeout { .. }), "{err:?}");
    assert!(
        message.contains(&format!("127.0.0.1:{dead}: ")),
        "{message}"
    );
    assert!(!message.contains("hunter2"), "{message}");
}

#[tokio::test]
async fn sentinels_and_cluster_seeds_that_refuse_are_named() {
    let (one, two) = (free_port(), free_port());
    let sentinels = format!("127.0.0.1:{one},127.0.0.1:{two}");
    let err = Client::connect(&format!("redis+sentinel://:hunter2@{sentinels}/mymaster"))
        .await
        .unwrap_err();
    names(err, &format!("Sentinel {sentinels}"));

    let seed = format!("redis://:hunter2@127.0.0.1:{one}");
    let err = Client::connect_urls(&[seed], ClientOptions::default().cluster(true))
        .await
        .unwrap_err();
    names(err, &format!("Cluster 127.0.0.1:{one}"));
}

/// A first connection is tried once: a refused one fails in milliseconds,
/// not after the back-off between reconnection tries (about 270 ms), which
/// is for connections that dropped. The best of five, so that a busy
/// machine does not decide it.
#[tokio::test]
async fn a_refused_first_connection_fails_at_once() {
    let mut took = Vec::new();
    for _ in 0..5 {
        let url = format!("redis://127.0.0.1:{}", free_port());
        let start = std::time::Instant::now();
        let err = Client::connect(&url).await.unwrap_err();
        took.push(start.elapsed());
        assert!(matches!(err, Error::Connection(_)), "{err:?}");
    }
    let best = took.iter().min().unwrap();
    assert!(*best < Duration::from_millis(100), "{took:?}");
}

/// A server that answers as no Redis does (an HTTP server on the port):
/// one line naming it and what it sent first, not the parser's byte codes.
#[tokio::test]
async fn a_server_that_is_not_redis_is_named_with_what_it_sent() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let http = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = http.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = http.accept().await {
            tokio::spawn(async move {
                let mut request = [0u8; 1024];
                let _ = conn.read(&mut request).await;
                let _ = conn
                    .write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
                    .await;
            });
        }
    });
    let url = format!("redis://:hunter2@127.0.0.1:{port}");
    let start = std::time::Instant::now();
    let err = Client::connect(&url).await.unwrap_err();
    assert!(start.elapsed() < Duration::from_secs(2), "{err}");
    let message = err.to_string();
    assert!(!message.contains('\n'), "one line: {message:?}");
    names(err, &format!("127.0.0.1:{port}"));
    assert!(
        message.ends_with(
            "the server did not answer as Redis does (it sent \"HTTP/1.1 400 Bad Request\" first): is it a Redis server?"
        ),
        "{message}"
    );
}

#[tokio::test]
async fn a_server_with_one_connection_left_is_connected_to() {
    let redis = rlock_test_support::RedisServer::start();
    let mut admin = redis.conn();
    let connected: String = redis::cmd("INFO").arg("clients").query(&mut admin).unwrap();
    let now: u64 = connected
        .lines()
        .find_map(|l| l.strip_prefix("connected_clients:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // One more connection is all the server takes: the client's own, not
    // the fast first try beside it, which must not fail the connect.
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxclients")
        .arg(now + 1)
        .query(&mut admin)
        .unwrap();
    let client = Client::connect(&redis.url()).await;
    let client = client.expect("connecting took the last free connection");
    drop(admin);
    let lock = client.lock("last").unwrap();
    assert!(lock.try_acquire().await.unwrap().is_some());
}
