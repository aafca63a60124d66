//! Measures what distinct lock names leave in Redis: acquires and releases
//! 100 000 names (or the count given), each once, against a fresh
//! redis-server of its own, and prints DBSIZE and `used_memory` before and
//! after.
//!
//! `cargo run --release -p rlock-core --example keys_left [-- NAMES]`

use std::time::Instant;

use futures_util::{stream, StreamExt};
use rlock_core::{Client, Wait};
use rlock_test_support::RedisServer;

fn dbsize(server: &RedisServer) -> u64 {
    redis::cmd("DBSIZE").query(&mut server.conn()).unwrap()
}

fn used_memory(server: &RedisServer) -> u64 {
    server
        .info("memory")
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .map(|n| n.trim().parse().unwrap())
        .unwrap()
}

#[tokio::main]
async fn main() {
    let names: usize = std::env::args()
        .nth(1)
        .map_or(100_000, |n| n.parse().expect("NAMES: a whole number"));
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    // The first lock loads the scripts (memory of their own): measure after it.
    let warm = client.lock("warm-up").unwrap();
    warm.acquire(Wait::Once).await.unwrap();
    warm.release().await.unwrap();
    let _: () = redis::cmd("FLUSHALL").query(&mut server.conn()).unwrap();

    let (keys_before, memory_before) = (dbsize(&server), used_memory(&server));
    let started = Instant::now();
    stream::iter(0..names)
        .map(|i| {
            let client = &client;
            async move {
                let lock = client.lock(&format!("product:{i}")).unwrap();
                lock.acquire(Wait::Once).await.unwrap();
                lock.release().await.unwrap();
            }
        })
        .buffer_unordered(64)
        .collect::<()>()
        .await;
    let took = started.elapsed();
    let (keys_after, memory_after) = (dbsize(&server), used_memory(&server));

    println!("{names} distinct names acquired and released in {took:.1?}");
    println!("DBSIZE       before {keys_before:>9}  after {keys_after:>9}");
    println!(
        "used_memory  before {memory_before:>9}  after {memory_after:>9}  (+{} bytes)",
        memory_after.saturating_sub(memory_before)
    );
}
