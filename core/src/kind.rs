//! What one lock handle takes: the mutex, a side of a read-write lock, or
//! permits of a semaphore. The wait, the line, the lease and its renewal are
//! the mutex's for every kind; the kind picks the keys and scripts (see
//! `keys.rs`) and what an acquisition asks for.

use crate::error::{Error, OptionName, Result};
use crate::keys::Family;

/// The most permits a semaphore may have.
pub const MAX_PERMITS: u32 = 1_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Mutex,
    /// A read-write lock's read side: shared with other readers.
    Read,
    /// A read-write lock's write side: nobody else inside.
    Write,
    /// `take` of a semaphore's `size` permits.
    Permits {
        size: u32,
        take: u32,
    },
    /// The rebuild lock of a cache entry: a mutex under keys of its own.
    Rebuild,
}

impl Kind {
    /// A semaphore's kind, checked: `take` permits of `size`.
    pub fn permits(size: i64, take: i64) -> Result<Kind> {
        let size = permit_count(OptionName::Permits, size)?;
        let take = permit_count(OptionName::Take, take)?;
        if take > size {
            return Err(Error::invalid_option(
                OptionName::Take,
                format!("must be at most the semaphore's {size} permits, got {take}"),
            ));
        }
        Ok(Kind::Permits { size, take })
    }

    pub fn family(self) -> Family {
        match self {
            Kind::Mutex => Family::Mutex,
            Kind::Read | Kind::Write => Family::RwLock,
            Kind::Permits { .. } => Family::Semaphore,
            Kind::Rebuild => Family::Rebuild,
        }
    }

    /// What ends the owner ids of this kind: one owner's read and write
    /// holdings are two holdings, each with its id (see `core/lua/many/lib.lua`).
    pub(crate) fn owner_suffix(self) -> &'static str {
        match self {
            Kind::Read => "/r",
            Kind::Write => "/w",
            Kind::Mutex | Kind::Permits { .. } | Kind::Rebuild => "",
        }
    }

    /// The permits an acquisition asks for, and the semaphore's size (0, 0
    /// when not a semaphore).
    pub(crate) fn asked(self) -> (u32, u32) {
        match self {
            Kind::Permits { size, take } => (take, size),
            _ => (0, 0),
        }
    }
}

/// A number of permits: a whole number from 1 to [`MAX_PERMITS`].
fn permit_count(option: OptionName, n: i64) -> Result<u32> {
    match u32::try_from(n) {
        Ok(n @ 1..=MAX_PERMITS) => Ok(n),
        _ => Err(not_a_permit_count(option, n)),
    }
}

/// A number of permits as a face that counts in floats (JavaScript) got
/// it: only a whole number is one (its range is checked with the kind).
pub fn whole_permits(option: OptionName, n: f64) -> Result<i64> {
    // NaN and the infinities have no whole part either.
    if n.fract() == 0.0 && n.abs() < i64::MAX as f64 {
        return Ok(n as i64);
    }
    Err(not_a_permit_count(option, n))
}

fn not_a_permit_count(option: OptionName, n: impl std::fmt::Display) -> Error {
    Error::invalid_option(
        option,
        format!("must be a whole number from 1 to {MAX_PERMITS}, got {n}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permits_are_checked_before_any_io() {
        assert_eq!(
            Kind::permits(3, 2).unwrap(),
            Kind::Permits { size: 3, take: 2 }
        );
        for (size, take) in [(0, 1), (-1, 1), (3, 0), (3, -2), (3, 4), (1_000_001, 1)] {
            assert!(
                matches!(Kind::permits(size, take), Err(Error::InvalidArgument(_))),
                "{size} {take}"
            );
        }
        assert!(Kind::permits(3, 4)
            .unwrap_err()
            .to_string()
            .contains("must be at most the semaphore's 3 permits, got 4"));
    }
}
