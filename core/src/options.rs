//! Every option of a lock and of a wait, and the validation of every
//! argument, done once here for every face and usable without a client. Each
//! check runs before any I/O, so a bad argument never leaves a half-written
//! lock behind.
//!
//! A face hands over a lock's options as it received them ([`LockArgs`]:
//! numbers in its own [`Unit`], seconds in Python and the CLI, milliseconds in
//! Node) and gets them back checked. An error names the option at fault as an
//! [`OptionName`], which each face spells its own way, so the message points at what
//! the user wrote.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use crate::error::{Error, OptionName, Result};

/// Default lease.
pub const DEFAULT_TTL: Duration = Duration::from_secs(30);

/// The default [`LockOptions::queue_after`]: a few handoffs' time on a LAN.
pub const QUEUE_AFTER: Duration = Duration::from_millis(10);

/// Leases above this are most likely a unit mistake (a ttl of 10000 meant as
/// milliseconds is 2.8 hours in seconds): valid, but warned about once (see
/// [`LockArgs::long_ttl_warning`]).
pub const LONG_TTL: Duration = Duration::from_secs(3600);

/// The longest lease or wait accepted; anything beyond is a unit mistake.
pub const MAX_DURATION: Duration = Duration::from_secs(366 * 24 * 3600);

/// Names up to this many bytes are accepted (64 KiB names are legitimate).
pub const MAX_NAME_BYTES: usize = 1 << 20;
const MAX_PREFIX_BYTES: usize = 256;

/// How a lock is held once acquired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockOptions {
    /// The lease: how long the lock outlives a holder that stops renewing it.
    pub ttl: Duration,
    /// Renew the lease every ttl/3 while held (the watchdog).
    pub auto_renew: bool,
    /// Cap on the total hold time: renewal stops so the lease ends by then.
    pub max_hold: Option<Duration>,
    /// After acquire and extend, `WAIT` for this many replicas to have the
    /// write; an acquisition too few acknowledge is undone and retried.
    pub sync_replicas: Option<u32>,
    /// Fair mode: waiters stand in line in Redis and a release hands the lock straight
    /// to the first live one, in arrival order.
    pub fair: bool,
    /// When not fair: how long a waiter competes for each release before it
    /// takes a place in line, from where releases are handed over in order
    /// (as Go's `sync.Mutex` turns to handing over after 1 ms). Barging stays
    /// cheap while waits are short, and no waiter loses to newcomers for
    /// longer than this. Redlock keeps no line: its waiters always compete.
    pub queue_after: Duration,
}

impl Default for LockOptions {
    fn default() -> Self {
        LockOptions {
            ttl: DEFAULT_TTL,
            auto_renew: true,
            max_hold: None,
            sync_replicas: None,
            fair: false,
            queue_after: QUEUE_AFTER,
        }
    }
}

impl LockOptions {
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    pub fn auto_renew(mut self, on: bool) -> Self {
        self.auto_renew = on;
        self
    }

    pub fn max_hold(mut self, max_hold: Option<Duration>) -> Self {
        self.max_hold = max_hold;
        self
    }

    pub fn sync_replicas(mut self, replicas: Option<u32>) -> Self {
        self.sync_replicas = replicas;
        self
    }

    pub fn fair(mut self, on: bool) -> Self {
        self.fair = on;
        self
    }

    pub fn queue_after(mut self, wait: Duration) -> Self {
        self.queue_after = wait;
        self
    }

    /// Options given directly in Rust: the same rules as [`LockArgs::check`].
    pub(crate) fn check(&self) -> Result<()> {
        lease_duration(OptionName::Ttl, self.ttl)?;
        if let Some(m) = self.max_hold {
            lease_duration(OptionName::MaxHold, m)?;
        }
        if let Some(k) = self.sync_replicas {
            replicas(k)?;
        }
        Ok(())
    }

    /// The lease a fresh acquisition asks for: never beyond `max_hold`.
    pub(crate) fn first_lease(&self) -> Duration {
        self.max_hold.map_or(self.ttl, |m| self.ttl.min(m))
    }
}

/// A lock's options as a face received them, before any check: numbers as
/// given, in `unit`; `None` leaves an option at its default.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LockArgs {
    pub unit: Unit,
    /// The lease ([`LockOptions::ttl`]).
    pub ttl: Option<f64>,
    /// How long an acquisition waits: `None` forever, 0 one attempt.
    pub timeout: Option<f64>,
    /// `false`: an acquisition makes exactly one attempt, whatever `timeout`.
    pub blocking: bool,
    pub auto_renew: bool,
    pub max_hold: Option<f64>,
    /// A count of replicas, as a number: the check makes it a whole one.
    pub sync_replicas: Option<f64>,
    pub fair: bool,
    pub queue_after: Option<f64>,
    /// A lease above [`LONG_TTL`] is meant: no warning about it.
    pub allow_long_ttl: bool,
}

impl LockArgs {
    /// Every option at its default, numbers counted in `unit`.
    pub fn new(unit: Unit) -> Self {
        let defaults = LockOptions::default();
        LockArgs {
            unit,
            ttl: None,
            timeout: None,
            blocking: true,
            auto_renew: defaults.auto_renew,
            max_hold: None,
            sync_replicas: None,
            fair: defaults.fair,
            queue_after: None,
            allow_long_ttl: false,
        }
    }

    /// The options checked: how the lock is held, and how long its
    /// acquisitions wait.
    pub fn check(&self) -> Result<(LockOptions, Wait)> {
        let unit = self.unit;
        let options = LockOptions {
            ttl: match self.ttl {
                Some(t) => lease(OptionName::Ttl, t, unit)?,
                None => DEFAULT_TTL,
            },
            auto_renew: self.auto_renew,
            max_hold: self
                .max_hold
                .map(|m| lease(OptionName::MaxHold, m, unit))
                .transpose()?,
            sync_replicas: self.sync_replicas.map(replica_count).transpose()?,
            fair: self.fair,
            queue_after: match self.queue_after {
                Some(q) => option_span(OptionName::QueueAfter, q, unit)?,
                None => QUEUE_AFTER,
            },
        };
        Ok((options, self.wait()?))
    }

    /// The wait alone (a face's `acquire()` may override `blocking` and
    /// `timeout`): not blocking is one attempt, no timeout is forever;
    /// negative, NaN and infinite timeouts are refused.
    pub fn wait(&self) -> Result<Wait> {
        let timeout = self
            .timeout
            .map(|t| option_span(OptionName::Timeout, t, self.unit))
            .transpose()?;
        Ok(match (self.blocking, timeout) {
            (false, _) => Wait::Once,
            (true, None) => Wait::Forever,
            (true, Some(d)) if d.is_zero() => Wait::Once,
            (true, Some(d)) => Wait::For(d),
        })
    }

    /// A warning to give when the lease is above [`LONG_TTL`] with neither
    /// `max_hold` nor `allow_long_ttl` set, the first time only in this
    /// process (so each face warns once, through its own warning mechanism);
    /// the options named as `spell` names them. Called once
    /// [`check`](Self::check) accepted the options.
    pub fn long_ttl_warning(&self, spell: &dyn Fn(OptionName) -> &'static str) -> Option<String> {
        static WARNED: AtomicBool = AtomicBool::new(false);
        self.long_ttl_warning_once(spell, &WARNED)
    }

    /// [`long_ttl_warning`](Self::long_ttl_warning) with the "once" flag given.
    fn long_ttl_warning_once(
        &self,
        spell: &dyn Fn(OptionName) -> &'static str,
        warned: &AtomicBool,
    ) -> Option<String> {
        let message = self.long_ttl_message(spell)?;
        (!warned.swap(true, Ordering::Relaxed)).then_some(message)
    }

    fn long_ttl_message(&self, spell: &dyn Fn(OptionName) -> &'static str) -> Option<String> {
        if self.allow_long_ttl || self.max_hold.is_some() {
            return None;
        }
        let given = self.ttl?;
        let ttl = lease(OptionName::Ttl, given, self.unit).ok()?;
        if ttl <= LONG_TTL {
            return None;
        }
        let hours = ttl.as_secs_f64() / 3600.0;
        let span = if hours < 48.0 {
            format!("{hours:.1} hours")
        } else {
            format!("{:.1} days", hours / 24.0)
        };
        let unit = match self.unit {
            Unit::Seconds => "seconds",
            Unit::Millis => "milliseconds",
        };
        let name = spell(OptionName::Ttl);
        Some(format!(
            "{name}={given} is a lease of {span}, as {name} counts {unit}; set {} or {} if a lease that long is meant",
            spell(OptionName::MaxHold),
            spell(OptionName::AllowLongTtl),
        ))
    }
}

/// The known option name nearest to `unknown`, for a face's "unknown option"
/// message; `None` when none is reasonably close. Names are compared without
/// case, word separators (`_`, `-`) or a unit suffix (`ms`), so `timeout`
/// finds `timeoutMs` and `autoRenew` finds `auto_renew`; then a name a
/// letter off, a name that ends or starts with another (`acquireTimeout`,
/// `timeoutMs`), and else the nearest by edit distance, when few enough
/// edits apart.
pub fn closest_option<'a>(unknown: &str, known: &[&'a str]) -> Option<&'a str> {
    let wanted = stem(unknown);
    if wanted.is_empty() {
        return None;
    }
    let similarity = |name: &str| strsim::normalized_damerau_levenshtein(&wanted, &stem(name));
    let best_of = |candidates: Vec<&'a str>| {
        candidates
            .into_iter()
            .max_by(|a, b| similarity(a).total_cmp(&similarity(b)))
    };
    let exact: Vec<&str> = known
        .iter()
        .copied()
        .filter(|k| stem(k) == wanted)
        .collect();
    if let Some(found) = best_of(exact) {
        return Some(found);
    }
    // A whole name a letter off comes before a name inside the one given:
    // `blocking_timout` is `blocking_timeout`, not `blocking`.
    const TYPO: f64 = 0.85;
    if let Some(found) = best_of(known.to_vec()).filter(|k| similarity(k) >= TYPO) {
        return Some(found);
    }
    // A name inside another, at either end: at least three letters, so that
    // a stray short word does not match every name that happens to hold it.
    // The end first: a compound's last word names the thing
    // (`blocking_timeout`, `acquireTimeout` are timeouts).
    let inside = |at_end: bool| {
        known
            .iter()
            .copied()
            .filter(|k| {
                let name = stem(k);
                let (short, long) = if name.len() < wanted.len() {
                    (&name, &wanted)
                } else {
                    (&wanted, &name)
                };
                short.len() >= 3
                    && if at_end {
                        long.ends_with(short.as_str())
                    } else {
                        long.starts_with(short.as_str())
                    }
            })
            .collect::<Vec<_>>()
    };
    if let Some(found) = best_of(inside(true)).or_else(|| best_of(inside(false))) {
        return Some(found);
    }
    // Nearer than this is a typo (a letter or two in a short name); farther
    // is another word.
    const CLOSE: f64 = 0.6;
    best_of(known.to_vec()).filter(|k| similarity(k) >= CLOSE)
}

/// A name as [`closest_option`] compares it: lower case, no separators, no
/// unit suffix.
fn stem(name: &str) -> String {
    let flat: String = name
        .chars()
        .filter(|c| *c != '_' && *c != '-')
        .flat_map(char::to_lowercase)
        .collect();
    match flat.strip_suffix("ms") {
        Some(stem) if !stem.is_empty() => stem.to_owned(),
        _ => flat,
    }
}

/// How long an acquisition may wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Exactly one attempt.
    Once,
    /// Wait up to this long (zero: one attempt).
    For(Duration),
    /// Wait until acquired.
    Forever,
}

impl Wait {
    /// None: no end (a span too long to count is as good as forever).
    pub(crate) fn deadline(self, start: Instant) -> Option<Instant> {
        match self {
            Wait::Once => Some(start),
            Wait::For(d) => start.checked_add(d),
            Wait::Forever => None,
        }
    }

    pub(crate) fn is_once(self) -> bool {
        matches!(self, Wait::Once | Wait::For(Duration::ZERO))
    }
}

/// The unit a face counts time in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Seconds,
    Millis,
}

impl Unit {
    fn to_duration(self, value: f64) -> Duration {
        match self {
            Unit::Seconds => Duration::from_secs_f64(value),
            Unit::Millis => Duration::from_secs_f64(value / 1000.0),
        }
    }
}

/// The shortest lease accepted. A holder counts its lease as over 2 ms + 1 %
/// early (the drift allowance, see `Deployment::drift`), and the reply that
/// grants it must come within what is left: a shorter lease could never be
/// counted as held (an acquisition would retry for ever on a free lock).
pub const MIN_LEASE: Duration = Duration::from_millis(10);

fn too_short(option: OptionName, given: impl std::fmt::Display) -> Error {
    Error::invalid_option(
        option,
        format!(
            "must be at least {} ms, got {given}: a holder counts its lease as over 2 ms + 1 % early, and a round trip to Redis must fit in what is left",
            MIN_LEASE.as_millis()
        ),
    )
}

/// A lease (ttl): finite, above zero, at most a year, at least
/// [`MIN_LEASE`].
pub fn lease(option: OptionName, value: f64, unit: Unit) -> Result<Duration> {
    if !value.is_finite() || value <= 0.0 {
        return Err(Error::invalid_option(
            option,
            format!("must be a finite number above 0, got {value}"),
        ));
    }
    let d = bounded(value, unit).map_err(|problem| Error::invalid_option(option, problem))?;
    if d < MIN_LEASE {
        let given = match unit {
            Unit::Seconds => format!("{value} s"),
            Unit::Millis => format!("{value} ms"),
        };
        return Err(too_short(option, given));
    }
    Ok(d)
}

/// An option that is a wait or a hold bound: see [`span`].
pub(crate) fn option_span(option: OptionName, value: f64, unit: Unit) -> Result<Duration> {
    // Only a timeout has "forever" for its unset value.
    if option == OptionName::Timeout && value == f64::INFINITY {
        return Err(Error::invalid_option(
            option,
            format!("must be finite (leave it unset to wait forever), got {value}"),
        ));
    }
    span(value, unit).map_err(|problem| Error::invalid_option(option, problem))
}

/// A wait or hold bound: finite, zero or above, at most a year. `Err` says
/// what is wrong, to follow the argument's name: this check serves a face's
/// own arguments too (the CLI's `--grace`).
pub fn span(value: f64, unit: Unit) -> std::result::Result<Duration, String> {
    if value.is_nan() || value < 0.0 {
        return Err(format!("must be a number of 0 or more, got {value}"));
    }
    if value.is_infinite() {
        return Err(format!("must be finite, got {value}"));
    }
    bounded(value, unit)
}

fn bounded(value: f64, unit: Unit) -> std::result::Result<Duration, String> {
    let limit = match unit {
        Unit::Seconds => MAX_DURATION.as_secs_f64(),
        Unit::Millis => MAX_DURATION.as_secs_f64() * 1000.0,
    };
    if value > limit {
        return Err(format!("must be at most one year, got {value}"));
    }
    Ok(unit.to_duration(value))
}

/// A duration given directly in Rust: the same rules as [`lease`].
pub(crate) fn lease_duration(option: OptionName, d: Duration) -> Result<Duration> {
    if d < MIN_LEASE {
        return Err(too_short(option, format!("{d:?}")));
    }
    if d > MAX_DURATION {
        return Err(Error::invalid_option(
            option,
            format!("must be at most one year, got {d:?}"),
        ));
    }
    Ok(d)
}

/// A replica count as a face's number: a whole one, 1 to 100.
fn replica_count(k: f64) -> Result<u32> {
    // NaN and the infinities have no whole part either.
    if k.fract() != 0.0 || !(0.0..=f64::from(u32::MAX)).contains(&k) {
        return Err(Error::invalid_option(
            OptionName::SyncReplicas,
            format!("must be a whole number of replicas (1 or more), got {k}"),
        ));
    }
    let n = k as u32;
    replicas(n)?;
    Ok(n)
}

/// A replica count for `sync_replicas`: 1 to 100 (0 would wait for nothing).
fn replicas(k: u32) -> Result<()> {
    if k == 0 || k > 100 {
        return Err(Error::invalid_option(
            OptionName::SyncReplicas,
            format!("must be between 1 and 100, got {k}"),
        ));
    }
    Ok(())
}

/// A lock name: not empty, not absurdly long, and not starting with `}` (that
/// would leave the `{NAME}` hash tag empty and split the lock's keys over
/// Redis Cluster slots).
pub fn name(name: &str) -> Result<()> {
    named("lock name", name)
}

/// A cache key: the rules of a lock name (its keys carry it in the same
/// `{KEY}` hash tag).
pub fn cache_key(key: &str) -> Result<()> {
    named("cache key", key)
}

fn named(noun: &str, name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::invalid(format!("{noun} must not be empty")));
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(Error::invalid(format!(
            "{noun} must be at most {MAX_NAME_BYTES} bytes, got {}",
            name.len()
        )));
    }
    if name.starts_with('}') {
        return Err(Error::invalid(format!(
            "{noun} must not start with '}}' (its keys' {{...}} hash tag would be empty)"
        )));
    }
    Ok(())
}

/// A key prefix: short, printable, no whitespace and no braces (braces would
/// move the hash tag away from the lock name).
pub fn prefix(prefix: &str) -> Result<()> {
    if prefix.is_empty() || prefix.len() > MAX_PREFIX_BYTES {
        return Err(Error::invalid(format!(
            "prefix must be 1 to {MAX_PREFIX_BYTES} bytes long"
        )));
    }
    if let Some(c) = prefix
        .chars()
        .find(|c| c.is_whitespace() || c.is_control() || *c == '{' || *c == '}')
    {
        return Err(Error::invalid(format!(
            "prefix must not contain whitespace, control characters or braces, found {c:?}"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leases_outside_the_sane_range_are_refused() {
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e12, 0.0000001] {
            assert!(lease(OptionName::Ttl, bad, Unit::Seconds).is_err(), "{bad}");
        }
        assert_eq!(
            lease(OptionName::Ttl, 1500.0, Unit::Millis).unwrap(),
            Duration::from_millis(1500)
        );
    }

    #[test]
    fn spans_accept_zero_and_refuse_negative_nan_and_infinite() {
        assert_eq!(span(0.0, Unit::Seconds).unwrap(), Duration::ZERO);
        for bad in [-0.1, f64::NAN, f64::INFINITY, 1e300] {
            assert!(span(bad, Unit::Seconds).is_err(), "{bad}");
        }
        let timeout = option_span(OptionName::Timeout, f64::INFINITY, Unit::Millis).unwrap_err();
        assert!(
            timeout.to_string().contains("unset to wait forever"),
            "{timeout}"
        );
        let queue_after =
            option_span(OptionName::QueueAfter, f64::INFINITY, Unit::Seconds).unwrap_err();
        assert!(
            !queue_after.to_string().contains("forever"),
            "{queue_after}"
        );
    }

    #[test]
    fn replica_counts_are_whole_numbers_from_1_to_100() {
        assert_eq!(replica_count(3.0).unwrap(), 3);
        for bad in [0.0, -1.0, 1.5, 101.0, f64::NAN, f64::INFINITY, 1e20] {
            let err = replica_count(bad).unwrap_err();
            assert!(
                matches!(&err, Error::InvalidArgument(i) if i.option == Some(OptionName::SyncReplicas)),
                "{bad}: {err:?}"
            );
        }
    }

    fn long_ttl(ttl: f64, unit: Unit) -> LockArgs {
        LockArgs {
            ttl: Some(ttl),
            ..LockArgs::new(unit)
        }
    }

    #[test]
    fn a_lease_above_an_hour_is_warned_about_unless_it_is_meant() {
        let spell: &dyn Fn(OptionName) -> &'static str = &OptionName::name;
        let message = long_ttl(10_000.0, Unit::Seconds).long_ttl_message(spell);
        assert_eq!(
            message.as_deref(),
            Some("ttl=10000 is a lease of 2.8 hours, as ttl counts seconds; set max_hold or allow_long_ttl if a lease that long is meant")
        );
        let node = |o: OptionName| match o {
            OptionName::Ttl => "ttlMs",
            OptionName::MaxHold => "maxHoldMs",
            _ => "allowLongTtl",
        };
        let message = long_ttl(3.0 * 24.0 * 3600e3, Unit::Millis).long_ttl_message(&node);
        assert_eq!(
            message.as_deref(),
            Some("ttlMs=259200000 is a lease of 3.0 days, as ttlMs counts milliseconds; set maxHoldMs or allowLongTtl if a lease that long is meant")
        );
        for quiet in [
            long_ttl(3600.0, Unit::Seconds),
            long_ttl(3_600_000.0, Unit::Millis),
            long_ttl(10_000.0, Unit::Millis),
            LockArgs::new(Unit::Seconds),
            LockArgs {
                max_hold: Some(20_000.0),
                ..long_ttl(10_000.0, Unit::Seconds)
            },
            LockArgs {
                allow_long_ttl: true,
                ..long_ttl(10_000.0, Unit::Seconds)
            },
        ] {
            assert_eq!(quiet.long_ttl_message(spell), None, "{quiet:?}");
        }
    }

    #[test]
    fn a_long_lease_is_warned_about_once_per_process() {
        let spell: &dyn Fn(OptionName) -> &'static str = &OptionName::name;
        let warned = AtomicBool::new(false);
        let long = long_ttl(10_000.0, Unit::Seconds);
        let short = long_ttl(30.0, Unit::Seconds);
        assert_eq!(short.long_ttl_warning_once(spell, &warned), None);
        assert!(
            long.long_ttl_warning_once(spell, &warned).is_some(),
            "a quiet lease does not use up the warning"
        );
        assert_eq!(long.long_ttl_warning_once(spell, &warned), None);
        assert_eq!(
            long_ttl(90_000.0, Unit::Seconds).long_ttl_warning_once(spell, &warned),
            None
        );
    }

    #[test]
    fn the_closest_option_is_found_across_case_separators_and_units() {
        let node = [
            "ttlMs",
            "timeoutMs",
            "autoRenew",
            "maxHoldMs",
            "syncReplicas",
            "fair",
            "queueAfterMs",
            "allowLongTtl",
        ];
        for (given, meant) in [
            ("timeout", "timeoutMs"),
            ("acquireTimeout", "timeoutMs"),
            ("ttl", "ttlMs"),
            ("TTL", "ttlMs"),
            ("auto_renew", "autoRenew"),
            ("renew", "autoRenew"),
            ("maxHold", "maxHoldMs"),
            ("timoutMs", "timeoutMs"),
            ("queue_after_ms", "queueAfterMs"),
            ("syncReplica", "syncReplicas"),
        ] {
            assert_eq!(closest_option(given, &node), Some(meant), "{given}");
        }
        let python = [
            "ttl",
            "timeout",
            "blocking",
            "auto_renew",
            "max_hold",
            "sync_replicas",
            "fair",
            "queue_after",
            "allow_long_ttl",
        ];
        for (given, meant) in [
            ("ttl_ms", "ttl"),
            ("timeoutMs", "timeout"),
            ("tll", "ttl"),
            ("blockng", "blocking"),
            ("autorenew", "auto_renew"),
            ("blocking_timeout", "timeout"),
            ("acquire_timeout", "timeout"),
        ] {
            assert_eq!(closest_option(given, &python), Some(meant), "{given}");
        }
        // The lock factories' (the wait by redis-py's name).
        let factory = ["ttl", "blocking_timeout", "blocking", "auto_renew"];
        for (given, meant) in [
            ("blocking_timout", "blocking_timeout"),
            ("blockingTimeout", "blocking_timeout"),
            ("blockng", "blocking"),
        ] {
            assert_eq!(closest_option(given, &factory), Some(meant), "{given}");
        }
        for far in ["colour", "x", "", "ms", "retries", "lease"] {
            assert_eq!(closest_option(far, &python), None, "{far}");
            assert_eq!(closest_option(far, &node), None, "{far}");
        }
    }

    #[test]
    fn names_and_prefixes_are_checked() {
        assert!(name("").is_err());
        assert!(name("}x").is_err());
        assert!(name("a}b{c\0é").is_ok());
        assert!(prefix("rlock").is_ok());
        for bad in ["", "a b", "a{", "x}", "a\tb"] {
            assert!(prefix(bad).is_err(), "{bad:?}");
        }
    }
}
