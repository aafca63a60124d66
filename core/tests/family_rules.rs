//! The protocol rules both script families keep (the mutex's `core/lua/mutex/`
//! and the many-holder `core/lua/many/`), each one test body run over every
//! primitive: the mutex, a read-write lock's write side and its read side, and
//! a semaphore. A rule added here is tested on both families at once.
//!
//! - a request resent after a lost reply is answered, not applied twice;
//! - fencing tokens strictly rise per name, and re-entry keeps its token;
//! - a release hands the lock to the first live waiter in line;
//! - a key of another type at a lock's name is a typed error and stays untouched;
//! - a torn line (an entry whose lease is gone) is dropped, not served.

use std::time::Duration;

use redis::Commands;
use rlock_core::{Client, Error, Lock, LockOptions, Wait};
use rlock_test_support::{behind_proxy, eventually, finished, script, Cut, RedisServer};

#[derive(Debug, Clone, Copy)]
enum Primitive {
    Mutex,
    Write,
    Read,
    Semaphore,
}

const ALL: [Primitive; 4] = [
    Primitive::Mutex,
    Primitive::Write,
    Primitive::Read,
    Primitive::Semaphore,
];

fn options() -> LockOptions {
    LockOptions::default()
        .ttl(Duration::from_secs(20))
        .fair(true)
}

impl Primitive {
    /// A new owner's handle of this primitive on `name` (a semaphore of one permit).
    fn handle(self, client: &Client, name: &str) -> Lock {
        match self {
            Primitive::Mutex => client.lock_with(name, options()).unwrap(),
            Primitive::Write => client.rw_lock(name, options()).unwrap().write().clone(),
            Primitive::Read => client.rw_lock(name, options()).unwrap().read().clone(),
            Primitive::Semaphore => client.semaphore(name, 1, options()).unwrap().lock().clone(),
        }
    }

    /// A new owner's handle that shuts this primitive out while it holds (a
    /// writer for the read side, the same kind for the others).
    fn rival(self, client: &Client, name: &str) -> Lock {
        match self {
            Primitive::Read => Primitive::Write.handle(client, name),
            other => other.handle(client, name),
        }
    }

    /// What a request of the family's release script carries.
    fn release_script(self, server: &RedisServer) -> Vec<u8> {
        match self {
            Primitive::Mutex => script(server, "mutex release"),
            _ => script(server, "many release"),
        }
    }

    /// A line entry of a client that no longer listens (nobody is
    /// subscribed to its waiter channel), with a valid lease as the family
    /// writes it: its owner id and its `leases` value.
    fn dead_waiter(self) -> (&'static str, &'static str) {
        match self {
            Primitive::Mutex => ("gone-client:1", "20000"),
            Primitive::Write => ("gone-client:1/w", "20000 0 0"),
            Primitive::Read => ("gone-client:1/r", "20000 0 0"),
            Primitive::Semaphore => ("gone-client:1", "20000 1 1"),
        }
    }

    fn name(self, rule: &str) -> String {
        format!("{rule}-{self:?}").to_lowercase()
    }
}

/// Whether `n` waiters stand in the line `queue` within 5 s.
async fn in_line(server: &RedisServer, queue: &str, n: usize) -> bool {
    eventually(Duration::from_secs(5), || {
        server.conn().llen::<_, usize>(queue).unwrap() == n
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nested_release_whose_reply_was_lost_is_answered_not_applied_twice() {
    let (server, proxy, client) = behind_proxy().await;
    let direct = Client::connect(&server.url()).await.unwrap();
    for p in ALL {
        let name = p.name("replay");
        let lock = p.handle(&client, &name);
        // Warm up: a cut on the SHA must meet the script, not NOSCRIPT.
        lock.acquire(Wait::Once).await.unwrap();
        lock.release().await.unwrap();

        lock.acquire(Wait::Once).await.unwrap();
        assert_eq!(lock.acquire(Wait::Once).await.unwrap().count, 2, "{p:?}");
        let before = proxy.cuts_done();
        proxy.cut_on(&p.release_script(&server), Cut::AfterForward, 1);
        // Applied (2 -> 1), its reply lost, sent again.
        assert_eq!(lock.release().await.unwrap(), 1, "{p:?}");
        assert_eq!(proxy.cuts_done(), before + 1, "{p:?}: no reply was lost");
        let rival = p.rival(&direct, &name);
        assert!(
            rival.try_acquire().await.unwrap().is_none(),
            "{p:?}: the resend was applied too, a rival got in"
        );
        assert_eq!(lock.lost(), None, "{p:?}");
        assert_eq!(lock.release().await.unwrap(), 0, "{p:?}");
        assert!(rival.try_acquire().await.unwrap().is_some(), "{p:?}");
        rival.release().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_tokens_strictly_rise_per_name_and_re_entry_keeps_its_token() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    for p in ALL {
        let name = p.name("fence");
        let lock = p.handle(&client, &name);
        let rival = p.rival(&client, &name);
        let mut last = 0;
        for round in 0..3 {
            let first = lock.acquire(Wait::Once).await.unwrap();
            assert!(
                first.fencing_token > last,
                "{p:?} round {round}: {first:?} after {last}"
            );
            let again = lock.acquire(Wait::Once).await.unwrap();
            assert_eq!(again.fencing_token, first.fencing_token, "{p:?}");
            assert_eq!(again.count, 2, "{p:?}");
            lock.release().await.unwrap();
            assert_eq!(lock.release().await.unwrap(), 0, "{p:?}");
            let other = rival.acquire(Wait::Once).await.unwrap();
            assert!(
                other.fencing_token > first.fencing_token,
                "{p:?}: {other:?} after {first:?}"
            );
            rival.release().await.unwrap();
            last = other.fencing_token;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_hands_the_lock_to_the_first_live_waiter_in_line() {
    let (server, proxy, waiting_client) = behind_proxy().await;
    let client = Client::connect(&server.url()).await.unwrap();
    let mut c = server.conn();
    for p in ALL {
        let name = p.name("handoff");
        let holder = p.rival(&client, &name);
        let held = holder.acquire(Wait::Once).await.unwrap();
        let waiter = p.handle(&waiting_client, &name);
        let keys = waiter.keys().clone();
        let waiting = {
            let waiter = waiter.clone();
            tokio::spawn(async move { waiter.acquire(Wait::For(Duration::from_secs(15))).await })
        };
        assert!(in_line(&server, &keys.queue, 1).await, "{p:?}");
        // A waiter whose client is gone stands ahead of it.
        let (dead, lease) = p.dead_waiter();
        let _: () = c.lpush(&keys.queue, dead).unwrap();
        let _: () = c.hset(&keys.leases, dead, lease).unwrap();
        // The waiter hears of the release late: only the release itself can
        // have made it the holder by the time the release returns.
        proxy.delay_pubsub(Duration::from_secs(2));
        assert_eq!(holder.release().await.unwrap(), 0, "{p:?}");
        assert!(
            waiter.owned().await.unwrap(),
            "{p:?}: the release did not hand the lock to the live waiter"
        );
        let got = finished(waiting, Duration::from_secs(10)).await.unwrap();
        proxy.delay_pubsub(Duration::ZERO);
        assert!(
            got.fencing_token > held.fencing_token,
            "{p:?}: {got:?} after {held:?}"
        );
        assert_eq!(waiter.fencing_token(), Some(got.fencing_token), "{p:?}");
        let late = p.rival(&client, &name);
        assert!(late.try_acquire().await.unwrap().is_none(), "{p:?}");
        assert!(!c.exists::<_, bool>(&keys.queue).unwrap(), "{p:?}");
        assert!(!c.exists::<_, bool>(&keys.leases).unwrap(), "{p:?}");
        waiter.release().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_of_another_type_at_the_lock_is_a_typed_error_and_left_untouched() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let mut c = server.conn();
    for p in ALL {
        let name = p.name("foreign");
        let lock = p.handle(&client, &name);
        let key = lock.keys().lock.clone();
        let _: () = c.set(&key, "an older SET NX lock").unwrap();
        // Held by someone else: busy (the mutex) or timed out naming the
        // key (the many-holder family), both the "timeout" category, never a
        // connection error.
        match lock.acquire(Wait::Once).await {
            Err(e @ (Error::Busy { .. } | Error::Timeout { .. })) => {
                assert_eq!(e.category(), "timeout", "{p:?}: {e:?}");
                if let Error::Timeout {
                    cause: Some(cause), ..
                } = &e
                {
                    assert!(cause.contains(&key), "{p:?}: {cause}");
                }
            }
            other => panic!("{p:?}: {other:?}"),
        }
        let waited = lock.acquire(Wait::For(Duration::from_millis(100))).await;
        assert!(
            matches!(waited, Err(Error::Timeout { .. })),
            "{p:?}: {waited:?}"
        );
        assert!(
            matches!(lock.release().await, Err(Error::NotOwned { .. })),
            "{p:?}"
        );
        assert!(lock.locked().await.unwrap(), "{p:?}");
        assert_eq!(
            c.get::<_, String>(&key).unwrap(),
            "an older SET NX lock",
            "{p:?}"
        );
        assert_eq!(c.ttl::<_, i64>(&key).unwrap(), -1, "{p:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_torn_line_entry_without_its_lease_is_dropped_not_served() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let mut c = server.conn();
    for p in ALL {
        let name = p.name("torn");
        let holder = p.rival(&client, &name);
        holder.acquire(Wait::Once).await.unwrap();
        let waiter = p.handle(&client, &name);
        let keys = waiter.keys().clone();
        let waiting = {
            let waiter = waiter.clone();
            tokio::spawn(async move { waiter.acquire(Wait::For(Duration::from_secs(15))).await })
        };
        assert!(in_line(&server, &keys.queue, 1).await, "{p:?}");
        // An entry of a live client (this one listens on its waiter channel
        // for the waiter above) whose lease field is gone.
        let torn = format!("{}:nolease", client.id());
        let _: () = c.lpush(&keys.queue, &torn).unwrap();
        assert_eq!(holder.release().await.unwrap(), 0, "{p:?}");
        // The holder's lease is 20 s: only being served explains this.
        finished(waiting, Duration::from_secs(5)).await.unwrap();
        assert!(waiter.owned().await.unwrap(), "{p:?}");
        let line: Vec<String> = c.lrange(&keys.queue, 0, -1).unwrap();
        assert!(line.is_empty(), "{p:?}: {line:?}");
        let other = p.rival(&client, &name);
        assert!(other.try_acquire().await.unwrap().is_none(), "{p:?}");
        waiter.release().await.unwrap();
    }
}
