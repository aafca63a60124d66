//! How the JS face spells the core's options: in camelCase, times in
//! milliseconds (`ttlMs`), as `node/index.d.ts` declares them; every message
//! and warning that names an option names it so.

use rlock_core::Opt;

/// A lock option as the JS face names it (`LockOptions` of `index.d.ts`).
pub fn option_name(option: Opt) -> &'static str {
    match option {
        Opt::Ttl => "ttlMs",
        Opt::Timeout => "timeoutMs",
        // No such option in JS: a `timeoutMs` of 0 is one attempt.
        Opt::Blocking => "blocking",
        Opt::AutoRenew => "autoRenew",
        Opt::MaxHold => "maxHoldMs",
        Opt::SyncReplicas => "syncReplicas",
        Opt::Fair => "fair",
        Opt::QueueAfter => "queueAfterMs",
        Opt::AllowLongTtl => "allowLongTtl",
        // A semaphore's size, and what one acquisition takes: both are
        // `permits`, of `client.semaphore()` and of `acquire()`.
        Opt::Permits | Opt::Take => "permits",
        Opt::Stale => "staleMs",
        Opt::NoneTtl => "noneTtlMs",
        Opt::Jitter => "jitter",
        Opt::Early => "early",
        Opt::OnError => "onError",
        Opt::LockTtl => "lockTtlMs",
        Opt::AtLeast => "atLeastMs",
        Opt::AtMost => "atMostMs",
    }
}
