//! A [`Stats`] snapshot in the Prometheus text exposition format (version
//! 0.0.4), so that an application serves it beside its own metrics without
//! the core depending on a metrics library.

use std::fmt::Write;

use super::metrics::{Stats, Timings, BUCKETS};

impl Stats {
    /// The snapshot as Prometheus text: counters `rlock_*_total` and the
    /// histograms `rlock_wait_seconds` and `rlock_hold_seconds`.
    pub fn prometheus(&self) -> String {
        let mut out = String::new();
        let counters = [
            ("acquisitions", "Acquisitions granted.", self.acquisitions),
            (
                "contended_acquisitions",
                "Acquisitions whose first attempt found the lock busy.",
                self.contended_acquisitions,
            ),
            (
                "acquire_timeouts",
                "Acquisitions that gave up at their deadline.",
                self.timeouts,
            ),
            ("releases", "Holdings released whole.", self.releases),
            (
                "renewals",
                "Holdings renewed by the watchdog.",
                self.renewals,
            ),
            (
                "renewal_round_trips",
                "Round trips the renewals took.",
                self.renewal_round_trips,
            ),
            (
                "renewal_failures",
                "Renewals Redis did not confirm in time.",
                self.renewal_failures,
            ),
            (
                "reconnects",
                "Connections to Redis lost and made again.",
                self.reconnects,
            ),
        ];
        for (name, help, value) in counters {
            counter_head(&mut out, name, help);
            let _ = writeln!(out, "rlock_{name}_total {value}");
        }
        counter_head(&mut out, "lost_leases", "Leases lost, by reason.");
        for (reason, n) in &self.lost {
            let _ = writeln!(
                out,
                "rlock_lost_leases_total{{reason=\"{}\"}} {n}",
                reason.code()
            );
        }
        histogram(
            &mut out,
            "wait_seconds",
            "From an acquisition's call to its grant.",
            &self.wait,
        );
        histogram(
            &mut out,
            "hold_seconds",
            "From a grant to the release of its holding.",
            &self.hold,
        );
        out
    }
}

fn counter_head(out: &mut String, name: &str, help: &str) {
    let _ = writeln!(out, "# HELP rlock_{name}_total {help}");
    let _ = writeln!(out, "# TYPE rlock_{name}_total counter");
}

fn histogram(out: &mut String, name: &str, help: &str, t: &Timings) {
    let _ = writeln!(out, "# HELP rlock_{name} {help}");
    let _ = writeln!(out, "# TYPE rlock_{name} histogram");
    for (bound, n) in BUCKETS.iter().zip(t.cumulative) {
        let _ = writeln!(out, "rlock_{name}_bucket{{le=\"{bound}\"}} {n}");
    }
    let _ = writeln!(out, "rlock_{name}_bucket{{le=\"+Inf\"}} {}", t.count);
    let _ = writeln!(out, "rlock_{name}_sum {}", t.sum.as_secs_f64());
    let _ = writeln!(out, "rlock_{name}_count {}", t.count);
}
