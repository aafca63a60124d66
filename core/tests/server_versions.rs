//! What a server's version decides when a client connects: a Redis Cluster
//! needs sharded pub/sub (Redis 7.0 and later, Valkey), and an older one is
//! refused at connect, before any lock is taken on it (docs/deployments.md).
//! Run on every server of `make test-matrix`.

use rlock_core::{Client, ClientOptions, Error, Wait};
use rlock_test_support::RedisServer;

#[tokio::test]
async fn a_cluster_without_sharded_pubsub_is_refused_at_connect_and_a_newer_one_is_not() {
    let node = RedisServer::start_cluster_node();
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query(&mut node.conn())
        .unwrap();
    let major: u32 = info
        .lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .and_then(|v| v.split('.').next()?.parse().ok())
        .expect("INFO names the version");
    let connected = Client::connect_urls(
        &[node.url().as_str()],
        ClientOptions::default().cluster(true),
    )
    .await;
    if major < 7 {
        match connected {
            Err(Error::InvalidArgument(e)) => {
                assert!(e.to_string().contains("Redis 7.0 or later"), "{e}")
            }
            other => panic!("a Redis {major} Cluster: {:?}", other.map(|_| "connected")),
        }
    } else {
        let client = connected.unwrap();
        let lock = client.lock("versioned").unwrap();
        lock.acquire(Wait::Once).await.unwrap();
        assert_eq!(lock.release().await.unwrap(), 0);
    }
}
