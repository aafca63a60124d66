//! A read-write lock by name: any number of readers or one writer. Its two
//! sides are [`Lock`]s of one owner, so each holding waits, stands in line,
//! renews and reports a loss as the mutex does; `core/lua/many/` decides who
//! may hold. Writers do not starve: once a writer waits in line, a new
//! reader waits behind it.

use crate::error::Result;
use crate::kind::Kind;
use crate::lock::Lock;
use crate::redis::scripts::ManyHolderState;

#[derive(Clone, Debug)]
pub struct RwLock {
    read: Lock,
    write: Lock,
}

impl RwLock {
    pub(crate) fn new(write: Lock) -> Result<Self> {
        Ok(RwLock {
            read: write.as_kind(Kind::Read),
            write,
        })
    }

    /// The read side: shared with other readers. Re-enters inside this
    /// owner's read or write (a writer may read; releasing the write while
    /// reading is a downgrade: no writer gets in between).
    pub fn read(&self) -> &Lock {
        &self.read
    }

    /// The write side: nobody else inside. Re-enters inside this owner's
    /// write; refused with [`Error::Upgrade`](crate::Error::Upgrade) while
    /// this owner holds only read.
    pub fn write(&self) -> &Lock {
        &self.write
    }

    /// The same lock seen by another owner unit (a binding's thread or task).
    pub fn with_owner(&self, unit: &str) -> RwLock {
        RwLock {
            read: self.read.with_owner(unit),
            write: self.write.with_owner(unit),
        }
    }

    pub fn name(&self) -> &str {
        self.write.name()
    }

    /// Readers, writer and waiters in Redis (one round trip).
    pub async fn state(&self) -> Result<ManyHolderState> {
        self.write.many_holder_state().await
    }
}
