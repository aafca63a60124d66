//! Several independent masters, as a Redlock client uses them.

use std::ops::{Deref, DerefMut};

use crate::RedisServer;

/// `n` independent servers (no replication between them), indexed like the
/// slice they deref to.
pub struct Masters(Vec<RedisServer>);

impl Masters {
    pub fn start(n: usize) -> Self {
        Masters((0..n).map(|_| RedisServer::start()).collect())
    }

    /// Every master's URL, in order: what a Redlock client connects to.
    pub fn urls(&self) -> Vec<String> {
        self.0.iter().map(RedisServer::url).collect()
    }
}

impl Deref for Masters {
    type Target = [RedisServer];

    fn deref(&self) -> &[RedisServer] {
        &self.0
    }
}

impl DerefMut for Masters {
    fn deref_mut(&mut self) -> &mut [RedisServer] {
        &mut self.0
    }
}

impl<'a> IntoIterator for &'a Masters {
    type Item = &'a RedisServer;
    type IntoIter = std::slice::Iter<'a, RedisServer>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}
