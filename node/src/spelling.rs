//! How the JS face spells the core's options: in camelCase, times in
//! milliseconds (`ttlMs`), as `node/index.d.ts` declares them; every message
//! and warning that names an option names it so.

use rlock_core::OptionName;

/// A lock option as the JS face names it (`LockOptions` of `index.d.ts`).
pub fn option_name(option: OptionName) -> &'static str {
    match option {
        OptionName::Ttl => "ttlMs",
        OptionName::Timeout => "timeoutMs",
        // No such option in JS: a `timeoutMs` of 0 is one attempt.
        OptionName::Blocking => "blocking",
        OptionName::AutoRenew => "autoRenew",
        OptionName::MaxHold => "maxHoldMs",
        OptionName::SyncReplicas => "syncReplicas",
        OptionName::Fair => "fair",
        OptionName::QueueAfter => "queueAfterMs",
        OptionName::AllowLongTtl => "allowLongTtl",
        // A semaphore's size, and what one acquisition takes: both are
        // `permits`, of `client.semaphore()` and of `acquire()`.
        OptionName::Permits | OptionName::Take => "permits",
        OptionName::Stale => "staleMs",
        OptionName::NoneTtl => "noneTtlMs",
        OptionName::Jitter => "jitter",
        OptionName::Early => "early",
        OptionName::OnError => "onError",
        OptionName::LockTtl => "lockTtlMs",
        OptionName::AtLeast => "atLeastMs",
        OptionName::AtMost => "atMostMs",
    }
}
