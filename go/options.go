package rlock

import "time"

/*
#include "rlock.h"
*/
import "C"

// Option sets one option of a lock (Mutex, RWMutex, Semaphore) or of a
// cache entry (Cached); WithTTL is both's. The core checks every value
// before any I/O; a lock's first acquisition (or Cached) returns the first
// refused as an *Error naming the option (errors.Is(err, ErrInvalid)), as
// it does an option of the other kind.
type Option func(*settings)

type settings struct {
	lock  C.RlockLockArgs
	cache C.RlockCacheArgs
	// The first option given that only a lock has, and only a cache entry.
	lockOnly, cacheOnly string
}

func (s *settings) forLock(name string) {
	if s.lockOnly == "" {
		s.lockOnly = name
	}
}

func (s *settings) forCache(name string) {
	if s.cacheOnly == "" {
		s.cacheOnly = name
	}
}

// ms is d in the milliseconds the core counts in (negative ones it refuses).
func ms(d time.Duration) C.double {
	return C.double(float64(d) / float64(time.Millisecond))
}

// WithTTL sets a lock's lease (default 30 s: renewed while held, so a
// holder that stops without letting go keeps the lock at most this long),
// or how long a cache entry stays fresh (required by Cached).
func WithTTL(d time.Duration) Option {
	return func(s *settings) {
		s.lock.ttl_ms, s.lock.has_ttl = ms(d), true
		s.cache.ttl_ms, s.cache.has_ttl = ms(d), true
	}
}

// WithoutAutoRenew holds each lease once: it ends after the TTL unless
// extended, the holder told at once (Lost).
func WithoutAutoRenew() Option {
	return func(s *settings) { s.lock.auto_renew = false; s.forLock("WithoutAutoRenew") }
}

// WithMaxHold caps a holding however long it is renewed.
func WithMaxHold(d time.Duration) Option {
	return func(s *settings) {
		s.lock.max_hold_ms, s.lock.has_max_hold = ms(d), true
		s.forLock("WithMaxHold")
	}
}

// WithSyncReplicas waits, on each acquisition, for n replicas to have it (WAIT).
func WithSyncReplicas(n int) Option {
	return func(s *settings) {
		s.lock.sync_replicas, s.lock.has_sync_replicas = C.double(n), true
		s.forLock("WithSyncReplicas")
	}
}

// WithFair serves waiters in the order they came (a line from the first wait).
func WithFair() Option {
	return func(s *settings) { s.lock.fair = true; s.forLock("WithFair") }
}

// WithQueueAfter sets how long a waiter retries on release messages before
// it takes a place in line (default 10 ms).
func WithQueueAfter(d time.Duration) Option {
	return func(s *settings) {
		s.lock.queue_after_ms, s.lock.has_queue_after = ms(d), true
		s.forLock("WithQueueAfter")
	}
}

// WithLongTTL allows a lock's TTL above a day without a warning.
func WithLongTTL() Option {
	return func(s *settings) { s.lock.allow_long_ttl = true; s.forLock("WithLongTTL") }
}

// WithStale serves a cache entry up to d past its TTL while one caller
// refreshes it in the background (stale-while-revalidate).
func WithStale(d time.Duration) Option {
	return func(s *settings) {
		s.cache.stale_ms, s.cache.has_stale = ms(d), true
		s.forCache("WithStale")
	}
}

// WithNoneTTL keeps a loader's "nothing found" (a nil value) for d.
func WithNoneTTL(d time.Duration) Option {
	return func(s *settings) {
		s.cache.none_ttl_ms, s.cache.has_none_ttl = ms(d), true
		s.forCache("WithNoneTTL")
	}
}

// WithJitter takes a random share (0 to 1) off each entry's TTL, so entries
// filled together expire apart.
func WithJitter(share float64) Option {
	return func(s *settings) {
		s.cache.jitter, s.cache.has_jitter = C.double(share), true
		s.forCache("WithJitter")
	}
}

// WithEarly sets the early refresh factor (XFetch's beta; 0: none).
func WithEarly(beta float64) Option {
	return func(s *settings) {
		s.cache.early, s.cache.has_early = C.double(beta), true
		s.forCache("WithEarly")
	}
}

// WithRetryOnError makes callers that waited for a rebuild that failed run
// the loader themselves, instead of returning its failure.
func WithRetryOnError() Option {
	return func(s *settings) { s.cache.retry_on_error = true; s.forCache("WithRetryOnError") }
}

// WithLockTTL sets the lease of a cache entry's rebuild lock.
func WithLockTTL(d time.Duration) Option {
	return func(s *settings) {
		s.cache.lock_ttl_ms, s.cache.has_lock_ttl = ms(d), true
		s.forCache("WithLockTTL")
	}
}

func settingsOf(opts []Option) settings {
	s := settings{lock: C.RlockLockArgs{auto_renew: true}}
	for _, o := range opts {
		o(&s)
	}
	return s
}
