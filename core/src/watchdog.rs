//! The watchdog: the one renewal loop of a client, which keeps every
//! auto-renew holding alive. It wakes at the earliest renewal or expiry of any
//! holding, renews everything due in one pipeline (one round trip per tick,
//! whatever the number of held locks), and leaves it to the holdings table to
//! mark a holding lost when its lease ends by this client's clock or a renewal
//! finds the key gone or someone else's. While anything is held it also
//! renews the client's registration when that is due, beside the renewals
//! (waking for it alone when the leases are longer than the registration's).

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::holdings::Holdings;
use crate::keys::Keys;
use crate::redis::deployment::Deployment;
use crate::registration::{Registration, RENEW_EVERY};
use crate::shutdown::Shutdown;

/// The renewal loop of one client. Ends when `shutdown` turns true.
pub(crate) async fn run(
    holdings: Arc<Holdings>,
    registration: Arc<Registration>,
    deployment: Arc<Deployment>,
    mut shutdown: Shutdown,
) {
    loop {
        // While anything is held, at least every RENEW_EVERY: a lease longer
        // than the registration's must not let the registration lapse.
        let next = holdings
            .plan_wake()
            .map(|at| at.min(Instant::now() + RENEW_EVERY));
        tokio::select! {
            _ = shutdown.signalled() => return,
            _ = holdings.changed() => continue,
            _ = sleep_until_opt(next) => {}
        }
        let now = Instant::now();
        holdings.expire(now);
        let batch = holdings.due(now);
        // Only while something is still held: the loop also wakes at the
        // plan of a holding released since, and an idle client sends nothing.
        if registration.due() && holdings.next_expiry().is_some() {
            // On a task of its own: a slow answer to it must not hold back
            // the renewals' outcome.
            let (registration, deployment) = (registration.clone(), deployment.clone());
            let telemetry = holdings.telemetry.clone();
            tokio::spawn(async move { registration.renew(&deployment, &telemetry).await });
        }
        if batch.is_empty() {
            continue;
        }
        let sent = Instant::now();
        // A renewal that outlives the earliest lease is as good as failed:
        // stop waiting for it so the expiry is reported on time.
        let deadline = holdings
            .next_expiry()
            .unwrap_or(sent + Duration::from_secs(3600));
        let requests: Vec<(&Keys, &str, u64, u64)> = batch
            .iter()
            .map(|r| (&*r.keys, &*r.owner, r.lease_ms, r.fence))
            .collect();
        let outcome = tokio::select! {
            r = deployment.renew(&requests, deadline) => r,
            _ = shutdown.signalled() => return,
        };
        holdings.telemetry.metrics.renewed(batch.len());
        holdings.apply(&batch, sent, &outcome, &deployment);
    }
}

async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
