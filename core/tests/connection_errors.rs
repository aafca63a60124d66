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
