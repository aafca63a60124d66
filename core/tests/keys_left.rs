//! Keys left behind: a released name leaves no key of its own, only the fence
//! counter of its Cluster slot, which every name of that slot shares; and each
//! name's fencing tokens still grow, holder after holder.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use futures_util::{stream, StreamExt};
use redis::cluster_routing::Slot;
use redis::Commands;
use rlock_core::{Client, ClientOptions, Keys, Lock, LockOptions, Wait};
use rlock_test_support::{eventually, finished, until_in_line, Masters, RedisServer};

/// Per-entity names. Squares rather than consecutive ids: consecutive ones
/// (`order:0`, `order:1`, ...) land in distinct slots (CRC16 is linear), and
/// the first test wants names that share a slot too.
fn names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("order:{}", i * i)).collect()
}

/// The Cluster slots of `names`, as Redis Cluster hashes their lock keys.
fn slots(names: &[String]) -> HashSet<Slot> {
    names
        .iter()
        .map(|n| Slot::for_key(Keys::new("rlock", n).lock))
        .collect()
}

/// The fence counters of `names`: one per slot.
fn counters(names: &[String]) -> HashSet<String> {
    names.iter().map(|n| Keys::new("rlock", n).fence).collect()
}

/// The keys locks left (the clients' registrations aside).
fn dbsize(server: &RedisServer) -> usize {
    server.data_keys().len()
}

/// Asserts that `server` holds the slot counters of `names` and nothing else,
/// waiting a little for clean-ups that run in the background (a cancelled
/// waiter leaving the line).
async fn assert_only_slot_counters_left(server: &RedisServer, names: &[String]) {
    let slots = slots(names).len();
    eventually(Duration::from_secs(5), || dbsize(server) == slots).await;
    assert_eq!(dbsize(server), slots, "keys against slots touched");
    let left: HashSet<String> = server.data_keys().into_iter().collect();
    assert_eq!(left, counters(names));
}

/// Acquires and releases each of `names` once, several at a time; the token
/// each got.
async fn take_each_once(client: &Client, names: &[String]) -> HashMap<String, u64> {
    stream::iter(names)
        .map(|name| async move {
            let lock = client.lock(name).unwrap();
            let held = lock.acquire(Wait::Once).await.unwrap();
            lock.release().await.unwrap();
            (name.clone(), held.fencing_token)
        })
        .buffer_unordered(16)
        .collect()
        .await
}

fn assert_each_names_tokens_grew(first: &HashMap<String, u64>, second: &HashMap<String, u64>) {
    for (name, token) in first {
        assert!(
            second[name] > *token,
            "{name}: {token} then {}",
            second[name]
        );
    }
}

#[tokio::test]
async fn thousands_of_released_names_leave_one_counter_per_slot_and_their_tokens_grow() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let names = names(3000);

    let first = take_each_once(&client, &names).await;
    let second = take_each_once(&client, &names).await;

    assert_each_names_tokens_grew(&first, &second);
    assert_only_slot_counters_left(&redis, &names).await;
    // Names of one slot share its counter, so a fresh name's first token
    // need not be 1; and every acquisition counted once, in one counter.
    assert!(slots(&names).len() < names.len());
    assert!(first.values().any(|&token| token > 1));
    let mut c = redis.conn();
    let counted: u64 = counters(&names)
        .iter()
        .map(|key| c.get::<_, u64>(key).unwrap())
        .sum();
    assert_eq!(counted, 2 * names.len() as u64);
}

fn fair() -> LockOptions {
    LockOptions::default().fair(true)
}

/// Takes and releases `lock` whenever it comes, handed over or not.
fn wait_and_release(lock: Lock) -> tokio::task::JoinHandle<u64> {
    tokio::spawn(async move {
        let token = lock.acquire(Wait::Forever).await.unwrap().fencing_token;
        lock.release().await.unwrap();
        token
    })
}

/// One name's turn with a line: a holder, a fair waiter, a waiter that is
/// not fair (it joins the line once it has waited `queue_after`), and a
/// fair waiter that gives up; the tokens of the three holders in turn.
async fn hand_over_through_the_line(client: &Client, name: &str) -> [u64; 3] {
    let holder = client.lock_with(name, fair()).unwrap();
    let first = holder.acquire(Wait::Once).await.unwrap().fencing_token;
    let fair_waiter = wait_and_release(client.lock_with(name, fair()).unwrap());
    until_in_line(&holder, 1).await;
    let other_waiter = wait_and_release(client.lock(name).unwrap());
    until_in_line(&holder, 2).await;
    let leaver = tokio::spawn({
        let leaver = client.lock_with(name, fair()).unwrap();
        async move { leaver.acquire(Wait::Forever).await }
    });
    until_in_line(&holder, 3).await;
    leaver.abort();
    let _ = leaver.await;
    until_in_line(&holder, 2).await;
    holder.release().await.unwrap();
    let second = finished(fair_waiter, Duration::from_secs(10)).await;
    let third = finished(other_waiter, Duration::from_secs(10)).await;
    [first, second, third]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_handed_over_through_their_lines_leave_one_counter_per_slot() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let names = names(60);

    let turns: Vec<(String, [u64; 3])> = stream::iter(&names)
        .map(|name| {
            let client = &client;
            async move { (name.clone(), hand_over_through_the_line(client, name).await) }
        })
        .buffer_unordered(8)
        .collect()
        .await;

    for (name, tokens) in &turns {
        assert!(
            tokens[0] < tokens[1] && tokens[1] < tokens[2],
            "{name}: {tokens:?}"
        );
    }
    assert_only_slot_counters_left(&redis, &names).await;
}

#[tokio::test]
async fn redlock_leaves_one_counter_per_slot_on_every_master() {
    let masters = Masters::start(3);
    let client = Client::connect_urls(&masters.urls(), ClientOptions::default())
        .await
        .unwrap();
    let names = names(500);

    let first = take_each_once(&client, &names).await;
    let second = take_each_once(&client, &names).await;

    // Redlock promises no order of tokens across failures; with every master
    // answering, each counts every acquisition, so a name's tokens grow.
    assert_each_names_tokens_grew(&first, &second);
    for master in &masters {
        assert_only_slot_counters_left(master, &names).await;
    }
}
