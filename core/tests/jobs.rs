//! Run-once jobs: a job every process schedules runs on one of them per
//! period; the others skip it at once; its lock stays taken until `at_least`
//! after the start, taken for `at_most` while the job runs, and never given
//! up early for want of an answer from Redis.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::Commands;
use rlock_core::{Client, Error, JobOptions, LostReason, OptionName};
use rlock_test_support::{behind_proxy, eventually, script, Cut, RedisServer};

fn every(at_least_ms: u64) -> JobOptions {
    JobOptions::default().at_least(Duration::from_millis(at_least_ms))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_three_processes_scheduled_at_once_one_runs_the_job_and_the_others_skip_at_once() {
    let redis = RedisServer::start();
    let runs = Arc::new(AtomicU32::new(0));
    let mut processes = Vec::new();
    for _ in 0..3 {
        let client = Client::connect(&redis.url()).await.unwrap();
        let runs = runs.clone();
        processes.push(tokio::spawn(async move {
            let began = Instant::now();
            let ran = client
                .run_once("nightly-report", every(60_000), |fence| async move {
                    runs.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(800)).await;
                    fence
                })
                .await
                .unwrap();
            (ran, began.elapsed())
        }));
    }
    let mut ran = Vec::new();
    for p in processes {
        let (outcome, took) = p.await.unwrap();
        match outcome {
            Some(fence) => ran.push(fence),
            // A skip never waits for the job.
            None => assert!(took < Duration::from_millis(700), "skipped after {took:?}"),
        }
    }
    assert_eq!(ran.len(), 1, "ran {ran:?}");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert!(ran[0] >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_ended_keeps_its_lock_until_at_least_after_its_start_then_runs_again() {
    let redis = RedisServer::start();
    let (a, b) = (
        Client::connect(&redis.url()).await.unwrap(),
        Client::connect(&redis.url()).await.unwrap(),
    );
    let started = Instant::now();
    let first = a
        .run_once("hourly", every(1500), |fence| async move { fence })
        .await
        .unwrap()
        .expect("the first run runs");
    // Done at once, and kept: its lease is what is left of at_least, and it
    // is not renewed.
    let pttl: i64 = redis.conn().pttl("rlock:{hourly}").unwrap();
    assert!((1..=1500).contains(&pttl), "pttl {pttl}");
    let skipped = b
        .run_once("hourly", every(1500), |_| async {})
        .await
        .unwrap();
    assert_eq!(skipped, None, "ran again within at_least");
    // Once at_least has passed since the first start, the next run runs.
    let deadline = Instant::now() + Duration::from_secs(10);
    let (fence, at) = loop {
        let run = b.run_once("hourly", every(1500), |fence| async move { fence });
        if let Some(fence) = run.await.unwrap() {
            break (fence, started.elapsed());
        }
        assert!(Instant::now() < deadline, "never ran again");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(fence > first, "{fence} after {first}");
    assert!(at >= Duration::from_millis(1400), "ran again after {at:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_past_at_most_loses_its_lock_and_says_so() {
    let redis = RedisServer::start();
    let (a, b) = (
        Client::connect(&redis.url()).await.unwrap(),
        Client::connect(&redis.url()).await.unwrap(),
    );
    let options = JobOptions::default().at_most(Duration::from_millis(600));
    let running = {
        let a = a.clone();
        tokio::spawn(async move {
            a.run_once("long", options, |_| async {
                tokio::time::sleep(Duration::from_millis(2500)).await;
            })
            .await
        })
    };
    // The first process runs the job (its lock taken) before the other
    // tries.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !redis.conn().exists::<_, bool>("rlock:{long}").unwrap() {
        assert!(
            Instant::now() < deadline,
            "the first run never took the job"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Past at_most the lock has ended: another process runs the job while
    // the first still does, and the first is told.
    while b
        .run_once("long", options, |_| async {})
        .await
        .unwrap()
        .is_none()
    {
        assert!(
            Instant::now() < deadline,
            "the lock was renewed past at_most"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        !running.is_finished(),
        "the first run ended before the second began"
    );
    let outcome = running.await.unwrap();
    // Taken for at_most and not renewed: its lease ran out.
    assert!(
        matches!(
            outcome,
            Err(Error::Lost {
                reason: LostReason::LeaseEnded,
                ..
            })
        ),
        "{outcome:?}"
    );
}

#[tokio::test]
async fn bad_bounds_are_refused_before_any_io() {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    let mut monitor = redis.monitor();
    for (options, option) in [
        (
            JobOptions::default()
                .at_most(Duration::from_secs(10))
                .at_least(Duration::from_secs(20)),
            OptionName::AtLeast,
        ),
        (
            JobOptions::default().at_most(Duration::from_millis(5)),
            OptionName::AtMost,
        ),
    ] {
        match client.start_job("report", options).await {
            Err(Error::InvalidArgument(invalid)) => assert_eq!(invalid.option, Some(option)),
            other => panic!("{options:?}: {other:?}"),
        }
    }
    assert!(monitor.mark().is_empty(), "sent before refusing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_lock_whose_replies_are_lost_is_never_given_up_early() {
    let (redis, proxy, a) = behind_proxy().await;
    let b = Client::connect(&redis.url()).await.unwrap();
    let extend = script(&redis, "mutex extend");
    // The shortening of the job's lock to at_least is applied, but its
    // reply and the resend's are lost: the job's lock must stay taken.
    let ran = a
        .run_once("daily", every(3_600_000), |_| async {
            proxy.cut_on(&extend, Cut::AfterForward, 2);
        })
        .await;
    assert!(matches!(ran, Ok(Some(()))), "{ran:?}");
    assert_eq!(
        proxy.cuts_done(),
        2,
        "the shortening was not sent as planned"
    );
    let pttl: i64 = redis.conn().pttl("rlock:{daily}").unwrap();
    assert!(pttl > 3_500_000, "kept for {pttl} ms");
    assert_eq!(
        b.run_once("daily", every(3_600_000), |_| async {})
            .await
            .unwrap(),
        None,
        "ran a second time in one period"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_taken_and_dropped_unrun_is_given_back() {
    let redis = RedisServer::start();
    let (a, b) = (
        Client::connect(&redis.url()).await.unwrap(),
        Client::connect(&redis.url()).await.unwrap(),
    );
    let job = a.start_job("abandoned", every(60_000)).await.unwrap();
    assert!(job.is_some());
    drop(job);
    let given_back = eventually(Duration::from_secs(5), || {
        !redis.conn().exists::<_, bool>("rlock:{abandoned}").unwrap()
    })
    .await;
    assert!(given_back, "the lock of a job nobody ran stayed taken");
    assert!(b
        .run_once("abandoned", every(60_000), |_| async {})
        .await
        .unwrap()
        .is_some());
}
