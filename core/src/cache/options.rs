//! A cache entry's options and their validation, done once here for every
//! face before any I/O. A face hands them over as it received them
//! ([`CacheArgs`], numbers in its own [`Unit`]) and gets them back checked.

use std::time::Duration;

use crate::error::{Error, OptionName, Result};
use crate::options::{lease, lease_duration, option_span, span, LockOptions, Unit, DEFAULT_TTL};

/// The share of an entry's ttl taken off at random by default, so entries
/// filled together do not all expire together: a ttl of 60 s keeps an entry
/// fresh between 54 and 60 s.
pub const DEFAULT_JITTER: f64 = 0.1;

/// XFetch's beta by default: 1 is the paper's optimum for an entry whose
/// rebuilds take about the same time each.
pub const DEFAULT_EARLY: f64 = 1.0;

/// How long an entry for "nothing found" is kept by default (never longer
/// than the ttl).
pub const DEFAULT_NONE_TTL: Duration = Duration::from_secs(10);

/// The shortest rebuild lock lease: a grant must outlive the allowance for
/// clock drift (about a hundredth of the lease and 2 ms) by far, or every
/// grant is given back as too late.
const MIN_LOCK_TTL: Duration = Duration::from_millis(100);

/// The largest early refresh factor accepted.
const MAX_EARLY: f64 = 100.0;

/// The largest value stored (Redis' own limit of a string).
pub const MAX_VALUE_BYTES: usize = 512 * 1024 * 1024;

/// What callers waiting for a rebuild do when its loader fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnError {
    /// Each of them gets that failure ([`Error::LoaderFailed`]).
    Share,
    /// Each of them tries again: one of them rebuilds next.
    Retry,
}

impl OnError {
    /// The value as every face spells it: `share`, `retry`.
    pub fn parse(text: &str) -> Result<OnError> {
        match text {
            "share" => Ok(OnError::Share),
            "retry" => Ok(OnError::Retry),
            other => Err(Error::invalid_option(
                OptionName::OnError,
                format!("must be \"share\" or \"retry\", got {other:?}"),
            )),
        }
    }
}

/// How a cache entry is read, rebuilt and kept.
#[derive(Debug, Clone, PartialEq)]
pub struct CacheOptions {
    /// How long an entry stays fresh (before jitter).
    pub ttl: Duration,
    /// After the ttl, how long the old value is still served at once while
    /// one caller refreshes it in the background (stale-while-revalidate).
    /// `None`: callers wait for the new value.
    pub stale: Option<Duration>,
    /// How long an entry for "nothing found" is kept; `None`: the
    /// [default](DEFAULT_NONE_TTL), never longer than `ttl`.
    pub none_ttl: Option<Duration>,
    /// The share of the ttl taken off at random, from 0 to below 1.
    pub jitter: f64,
    /// Early refresh (XFetch's beta): the larger, the earlier one caller
    /// refreshes a fresh entry before it expires; 0: never early.
    pub early: f64,
    /// How long a caller waits for another caller's rebuild; `None`: as
    /// long as it takes.
    pub timeout: Option<Duration>,
    pub on_error: OnError,
    /// The lease of the rebuild lock (renewed while the loader runs).
    pub lock_ttl: Duration,
}

impl CacheOptions {
    /// Entries fresh for `ttl`, every other option at its default.
    pub fn new(ttl: Duration) -> Self {
        CacheOptions {
            ttl,
            stale: None,
            none_ttl: None,
            jitter: DEFAULT_JITTER,
            early: DEFAULT_EARLY,
            timeout: None,
            on_error: OnError::Share,
            lock_ttl: DEFAULT_TTL,
        }
    }

    pub fn stale(mut self, window: Option<Duration>) -> Self {
        self.stale = window;
        self
    }

    pub fn none_ttl(mut self, ttl: Duration) -> Self {
        self.none_ttl = Some(ttl);
        self
    }

    pub fn jitter(mut self, share: f64) -> Self {
        self.jitter = share;
        self
    }

    pub fn early(mut self, beta: f64) -> Self {
        self.early = beta;
        self
    }

    pub fn timeout(mut self, timeout: Option<Duration>) -> Self {
        self.timeout = timeout;
        self
    }

    pub fn on_error(mut self, on_error: OnError) -> Self {
        self.on_error = on_error;
        self
    }

    pub fn lock_ttl(mut self, lease: Duration) -> Self {
        self.lock_ttl = lease;
        self
    }

    /// Options given directly in Rust: the same rules as [`CacheArgs::check`].
    pub(crate) fn check(&self) -> Result<()> {
        lease_duration(OptionName::Ttl, self.ttl)?;
        if let Some(s) = self.stale {
            span(s.as_secs_f64(), Unit::Seconds)
                .map_err(|problem| Error::invalid_option(OptionName::Stale, problem))?;
        }
        if let Some(n) = self.none_ttl {
            lease_duration(OptionName::NoneTtl, n)?;
        }
        jitter(self.jitter)?;
        early(self.early)?;
        if let Some(t) = self.timeout {
            span(t.as_secs_f64(), Unit::Seconds)
                .map_err(|problem| Error::invalid_option(OptionName::Timeout, problem))?;
        }
        lock_ttl(lease_duration(OptionName::LockTtl, self.lock_ttl)?)?;
        Ok(())
    }

    /// How long an entry for "nothing found" is kept.
    pub(crate) fn none_ttl_or_default(&self) -> Duration {
        self.none_ttl.unwrap_or(DEFAULT_NONE_TTL.min(self.ttl))
    }

    /// The rebuild lock's options.
    pub(crate) fn lock(&self) -> LockOptions {
        LockOptions::default().ttl(self.lock_ttl)
    }
}

/// A cache entry's options as a face received them, before any check:
/// numbers as given, in `unit`; `None` leaves an option at its default.
#[derive(Debug, Clone, PartialEq)]
pub struct CacheArgs {
    pub unit: Unit,
    /// Required: how long an entry stays fresh.
    pub ttl: Option<f64>,
    /// 0 or unset: no stale window.
    pub stale: Option<f64>,
    pub none_ttl: Option<f64>,
    pub jitter: Option<f64>,
    pub early: Option<f64>,
    /// Unset: wait as long as the rebuild takes.
    pub timeout: Option<f64>,
    /// `share` or `retry`.
    pub on_error: Option<String>,
    pub lock_ttl: Option<f64>,
}

impl CacheArgs {
    /// Every option at its default, numbers counted in `unit`.
    pub fn new(unit: Unit) -> Self {
        CacheArgs {
            unit,
            ttl: None,
            stale: None,
            none_ttl: None,
            jitter: None,
            early: None,
            timeout: None,
            on_error: None,
            lock_ttl: None,
        }
    }

    pub fn check(&self) -> Result<CacheOptions> {
        let unit = self.unit;
        let ttl = match self.ttl {
            Some(t) => lease(OptionName::Ttl, t, unit)?,
            None => {
                return Err(Error::invalid_option(
                    OptionName::Ttl,
                    "must be given: how long an entry stays fresh",
                ))
            }
        };
        let stale = self
            .stale
            .map(|s| option_span(OptionName::Stale, s, unit))
            .transpose()?
            .filter(|s| !s.is_zero());
        let options = CacheOptions {
            ttl,
            stale,
            none_ttl: self
                .none_ttl
                .map(|n| lease(OptionName::NoneTtl, n, unit))
                .transpose()?,
            jitter: self.jitter.map_or(Ok(DEFAULT_JITTER), jitter)?,
            early: self.early.map_or(Ok(DEFAULT_EARLY), early)?,
            timeout: self
                .timeout
                .map(|t| option_span(OptionName::Timeout, t, unit))
                .transpose()?,
            on_error: self
                .on_error
                .as_deref()
                .map_or(Ok(OnError::Share), OnError::parse)?,
            lock_ttl: match self.lock_ttl {
                Some(l) => lock_ttl(lease(OptionName::LockTtl, l, unit)?)?,
                None => DEFAULT_TTL,
            },
        };
        Ok(options)
    }
}

fn lock_ttl(lease: Duration) -> Result<Duration> {
    if lease >= MIN_LOCK_TTL {
        return Ok(lease);
    }
    Err(Error::invalid_option(
        OptionName::LockTtl,
        format!("must be at least {MIN_LOCK_TTL:?}, got {lease:?}"),
    ))
}

fn jitter(share: f64) -> Result<f64> {
    if (0.0..1.0).contains(&share) {
        return Ok(share);
    }
    Err(Error::invalid_option(
        OptionName::Jitter,
        format!("must be a share of the ttl from 0 to below 1, got {share}"),
    ))
}

fn early(beta: f64) -> Result<f64> {
    if (0.0..=MAX_EARLY).contains(&beta) {
        return Ok(beta);
    }
    Err(Error::invalid_option(
        OptionName::Early,
        format!("must be a number from 0 (never early) to {MAX_EARLY}, got {beta}"),
    ))
}

/// A value a rebuild stores: at most [`MAX_VALUE_BYTES`].
pub(crate) fn value(key: &str, value: Option<&[u8]>) -> Result<()> {
    match value {
        Some(v) if v.len() > MAX_VALUE_BYTES => Err(Error::invalid(format!(
            "cache entry {key:?}: the value is {} bytes, above the {MAX_VALUE_BYTES} Redis stores",
            v.len()
        ))),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(f: impl FnOnce(&mut CacheArgs)) -> Result<CacheOptions> {
        let mut a = CacheArgs::new(Unit::Seconds);
        a.ttl = Some(60.0);
        f(&mut a);
        a.check()
    }

    fn option_of(r: Result<CacheOptions>) -> Option<OptionName> {
        match r {
            Err(Error::InvalidArgument(i)) => i.option,
            other => panic!("expected an invalid argument, got {other:?}"),
        }
    }

    #[test]
    fn defaults_are_the_stated_ones() {
        let o = args(|_| {}).unwrap();
        assert_eq!(o.ttl, Duration::from_secs(60));
        assert_eq!(o.stale, None);
        assert_eq!(o.none_ttl_or_default(), DEFAULT_NONE_TTL);
        assert_eq!(o.jitter, 0.1);
        assert_eq!(o.early, 1.0);
        assert_eq!(o.timeout, None);
        assert_eq!(o.on_error, OnError::Share);
        assert_eq!(o.lock_ttl, DEFAULT_TTL);
        let short = args(|a| a.ttl = Some(2.0)).unwrap();
        assert_eq!(short.none_ttl_or_default(), Duration::from_secs(2));
    }

    #[test]
    fn each_bad_option_is_named() {
        assert_eq!(option_of(args(|a| a.ttl = None)), Some(OptionName::Ttl));
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert_eq!(
                option_of(args(|a| a.ttl = Some(bad))),
                Some(OptionName::Ttl)
            );
        }
        assert_eq!(
            option_of(args(|a| a.stale = Some(-1.0))),
            Some(OptionName::Stale)
        );
        assert_eq!(
            option_of(args(|a| a.none_ttl = Some(0.0))),
            Some(OptionName::NoneTtl)
        );
        for bad in [-0.1, 1.0, f64::NAN] {
            assert_eq!(
                option_of(args(|a| a.jitter = Some(bad))),
                Some(OptionName::Jitter)
            );
        }
        for bad in [-1.0, 101.0, f64::NAN] {
            assert_eq!(
                option_of(args(|a| a.early = Some(bad))),
                Some(OptionName::Early)
            );
        }
        assert_eq!(
            option_of(args(|a| a.on_error = Some("raise".into()))),
            Some(OptionName::OnError)
        );
        assert_eq!(
            option_of(args(|a| a.timeout = Some(-2.0))),
            Some(OptionName::Timeout)
        );
        for bad in [0.0, 0.05] {
            assert_eq!(
                option_of(args(|a| a.lock_ttl = Some(bad))),
                Some(OptionName::LockTtl)
            );
        }
    }

    #[test]
    fn a_zero_stale_window_is_none() {
        assert_eq!(args(|a| a.stale = Some(0.0)).unwrap().stale, None);
        let o = args(|a| a.stale = Some(5.0)).unwrap();
        assert_eq!(o.stale, Some(Duration::from_secs(5)));
    }
}
