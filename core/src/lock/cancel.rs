//! What an abandoned wait leaves behind (its place in line, a grant handed to
//! it, an attempt still in flight) is finished in the background, as a
//! clean-up of its owner's: that owner's next acquisition of the lock waits
//! for it, so none of it acts on that acquisition.

use std::future::Future;
use std::time::Duration;

use super::{release, Lock};
use crate::error::Error;

/// The pauses before each new try of a clean-up in the background (leaving
/// the line, passing on a grant) that Redis did not answer.
pub(super) const RETRY_PAUSES: [Duration; 4] = [
    Duration::from_millis(50),
    Duration::from_millis(200),
    Duration::from_millis(1000),
    Duration::from_millis(5000),
];

impl Lock {
    /// Runs `work` in the background as a clean-up of this owner's: its next
    /// acquisition of this lock waits for it, so none of it acts on that.
    pub(super) fn clean_up<F, Fut>(self, work: F)
    where
        F: FnOnce(Lock) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let context = self.context();
        let cleanup = context.waiters.cleanup(&self.keys.lock, &self.owner);
        let runtime = context.runtime().clone();
        let work = work(self);
        runtime.spawn(async move {
            work.await;
            drop(cleanup);
        });
    }

    /// Releases a holding its caller let go of unreleased (an acquisition
    /// dropped before its reply, a run-once job dropped before it ran),
    /// tried again while Redis does not answer: nobody holds that lock,
    /// which would otherwise stay taken until its lease ends (a run-once
    /// job's is its `at_most`, an hour by default). Each try is of that
    /// holding alone (its generation): a later holding of the same owner (a
    /// clone's wait woken by the first try's release message, whose reply
    /// was lost) is never released by a later try. A resend to Redis is
    /// safe as any release's: it names the holding it ends (see
    /// `release.lua`).
    pub(crate) async fn release_persistently(&self) {
        let Some(held) = self.view() else {
            return;
        };
        for pause in std::iter::once(Duration::ZERO).chain(RETRY_PAUSES) {
            tokio::time::sleep(pause).await;
            match release::run(self, Some(held.generation)).await {
                Err(Error::Connection(e)) => {
                    tracing::debug!(target: "rlock", lock = %self.name, error = %e, "releasing a dropped acquisition failed; trying again");
                }
                _ => return,
            }
        }
    }
}
