//! A counting semaphore by name: at most `size` permits held at once, each
//! acquisition one or more of them under its own lease. A handle is one
//! owner, as for the mutex: acquiring again re-enters its holding (and takes
//! no more permits). Waiters stand in line; a release hands the permits it
//! frees to as many waiters at the head of the line as they serve.

use crate::error::Result;
use crate::kind::Kind;
use crate::lock::{Acquired, Lock};
use crate::options::Wait;
use crate::redis::scripts::ManyHolderState;

#[derive(Clone, Debug)]
pub struct Semaphore {
    /// Taking one permit; [`Semaphore::permits`] gives handles taking more.
    lock: Lock,
    size: u32,
}

impl Semaphore {
    pub(crate) fn new(lock: Lock) -> Result<Self> {
        let Kind::Permits { size, .. } = lock.kind() else {
            unreachable!("a semaphore is made of permits");
        };
        Ok(Semaphore { lock, size })
    }

    /// The permits it has.
    pub fn size(&self) -> u32 {
        self.size
    }

    pub fn name(&self) -> &str {
        self.lock.name()
    }

    /// This owner's handle taking one permit: release, extend, lost and the
    /// rest are a [`Lock`]'s.
    pub fn lock(&self) -> &Lock {
        &self.lock
    }

    /// This owner's handle taking `take` permits (checked: 1 to the size).
    pub fn permits(&self, take: i64) -> Result<Lock> {
        Ok(self
            .lock
            .as_kind(Kind::permits(i64::from(self.size), take)?))
    }

    /// Acquires `take` permits, waiting as `wait` allows.
    pub async fn acquire(&self, take: i64, wait: Wait) -> Result<Acquired> {
        self.permits(take)?.acquire(wait).await
    }

    /// Releases this owner's holding (one re-entry of it).
    pub async fn release(&self) -> Result<u32> {
        self.lock.release().await
    }

    /// The same semaphore seen by another owner unit (a binding's thread or task).
    pub fn with_owner(&self, unit: &str) -> Semaphore {
        Semaphore {
            lock: self.lock.with_owner(unit),
            size: self.size,
        }
    }

    /// Holders, permits and waiters in Redis (one round trip).
    pub async fn state(&self) -> Result<ManyHolderState> {
        self.lock.many_holder_state().await
    }

    /// Permits free now (one round trip).
    pub async fn available(&self) -> Result<u32> {
        let state = self.state().await?;
        Ok(state.size.unwrap_or(self.size).saturating_sub(state.used()))
    }

    /// Permits held now, by every holder (one round trip).
    pub async fn held(&self) -> Result<u32> {
        Ok(self.state().await?.used())
    }
}
