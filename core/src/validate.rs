//! Argument validation, done once here for every face. Each check runs before
//! any I/O, so a bad argument never leaves a half-written lock behind.
//!
//! The bindings pass numbers as they received them (seconds in Python and the
//! CLI, milliseconds in Node); `Unit` names the argument in the face's own
//! spelling so the message points at what the user wrote.

use std::time::Duration;

use crate::error::{Error, Result};

/// The longest lease or wait accepted; anything beyond is a unit mistake.
pub const MAX_DURATION: Duration = Duration::from_secs(366 * 24 * 3600);
/// Names up to this many bytes are accepted (64 KiB names are legitimate).
pub const MAX_NAME_BYTES: usize = 1 << 20;
const MAX_PREFIX_BYTES: usize = 256;

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

/// A lease (ttl): finite, above zero, at most a year, at least one millisecond
/// once rounded (Redis leases are whole milliseconds).
pub fn lease(arg: &str, value: f64, unit: Unit) -> Result<Duration> {
    if !value.is_finite() || value <= 0.0 {
        return Err(Error::invalid(format!(
            "{arg} must be a finite number above 0, got {value}"
        )));
    }
    let d = bounded(arg, value, unit)?;
    if d < Duration::from_millis(1) {
        return Err(Error::invalid(format!(
            "{arg} must be at least 1 millisecond, got {value}"
        )));
    }
    Ok(d)
}

/// A wait or hold bound: finite, zero or above, at most a year.
pub fn span(arg: &str, value: f64, unit: Unit) -> Result<Duration> {
    if value.is_nan() || value < 0.0 {
        return Err(Error::invalid(format!(
            "{arg} must be a number of 0 or more, got {value}"
        )));
    }
    if value.is_infinite() {
        // Only a timeout has "forever" for its unset value.
        let hint = if arg.starts_with("timeout") {
            " (leave it unset to wait forever)"
        } else {
            ""
        };
        return Err(Error::invalid(format!(
            "{arg} must be finite{hint}, got {value}"
        )));
    }
    bounded(arg, value, unit)
}

fn bounded(arg: &str, value: f64, unit: Unit) -> Result<Duration> {
    let limit = match unit {
        Unit::Seconds => MAX_DURATION.as_secs_f64(),
        Unit::Millis => MAX_DURATION.as_secs_f64() * 1000.0,
    };
    if value > limit {
        return Err(Error::invalid(format!(
            "{arg} must be at most one year, got {value}"
        )));
    }
    Ok(unit.to_duration(value))
}

/// A duration given directly in Rust: the same rules as [`lease`].
pub(crate) fn lease_duration(arg: &str, d: Duration) -> Result<Duration> {
    if d < Duration::from_millis(1) || d > MAX_DURATION {
        return Err(Error::invalid(format!(
            "{arg} must be between 1 ms and one year, got {d:?}"
        )));
    }
    Ok(d)
}

/// A lock name: not empty, not absurdly long, and not starting with `}` (that
/// would leave the `{NAME}` hash tag empty and split the lock's keys over
/// Redis Cluster slots).
pub fn name(name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::invalid("lock name must not be empty"));
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(Error::invalid(format!(
            "lock name must be at most {MAX_NAME_BYTES} bytes, got {}",
            name.len()
        )));
    }
    if name.starts_with('}') {
        return Err(Error::invalid(
            "lock name must not start with '}' (the key's {NAME} hash tag would be empty)",
        ));
    }
    Ok(())
}

/// A replica count for `sync_replicas`: 1 to 100 (0 would wait for nothing).
pub fn replicas(k: u32) -> Result<()> {
    if k == 0 || k > 100 {
        return Err(Error::invalid(format!(
            "sync_replicas must be between 1 and 100, got {k}"
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

/// A server URL, checked without connecting (for faces that connect lazily);
/// returns the URL as it may be shown, any password replaced by `***`.
pub fn url(url: &str) -> Result<String> {
    crate::client::checked_url(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leases_outside_the_sane_range_are_refused() {
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e12, 0.0000001] {
            assert!(lease("ttl", bad, Unit::Seconds).is_err(), "{bad}");
        }
        assert_eq!(
            lease("ttlMs", 1500.0, Unit::Millis).unwrap(),
            Duration::from_millis(1500)
        );
    }

    #[test]
    fn spans_accept_zero_and_refuse_negative_nan_and_infinite() {
        assert_eq!(span("timeout", 0.0, Unit::Seconds).unwrap(), Duration::ZERO);
        for bad in [-0.1, f64::NAN, f64::INFINITY, 1e300] {
            assert!(span("timeout", bad, Unit::Seconds).is_err(), "{bad}");
        }
        let timeout = span("timeoutMs", f64::INFINITY, Unit::Millis).unwrap_err();
        assert!(
            timeout.to_string().contains("unset to wait forever"),
            "{timeout}"
        );
        let queue_after = span("queue_after", f64::INFINITY, Unit::Seconds).unwrap_err();
        assert!(
            !queue_after.to_string().contains("forever"),
            "{queue_after}"
        );
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

    #[test]
    fn urls_are_checked_without_connecting_and_shown_without_password() {
        // Port 1 has no server: nothing here may try to connect.
        assert_eq!(
            url("redis://:hunter2@127.0.0.1:1/0").unwrap(),
            "redis://:***@127.0.0.1:1/0"
        );
        assert_eq!(url("redis://127.0.0.1:1").unwrap(), "redis://127.0.0.1:1");
        for bad in [
            "http://127.0.0.1:1",
            "redis://",
            "not a url",
            "redis://h:1/db",
        ] {
            let err = url(bad).unwrap_err();
            assert!(matches!(err, Error::InvalidArgument(_)), "{bad}: {err}");
        }
        let err = url("http://u:hunter2@127.0.0.1:1").unwrap_err();
        assert!(!err.to_string().contains("hunter2"), "{err}");
    }
}
