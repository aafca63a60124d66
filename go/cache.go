package rlock

/*
#include "rlock.h"
*/
import "C"

import (
	"context"
	"fmt"
	"runtime"
)

// The format this face tags its values with: bytes, as it reads every
// other face's (a JSON or text value is its UTF-8; Python's pickle is
// Python's alone).
const format = "bytes"

// Cached reads the cache entry key: its value while fresh; on a miss, one
// caller across every process and face runs its loader while the others
// wait for its value (woken, not polling), and what the loader returns is
// stored (nil: "nothing found", kept WithNoneTTL) and returned. WithTTL is
// required; WithStale, WithNoneTTL, WithJitter, WithEarly,
// WithRetryOnError and WithLockTTL are the other options. The loader's
// error is returned to its caller, and to those waiting for it as
// ErrLoader (or they run the loader themselves, WithRetryOnError). A wait
// ends when ctx is done, with ctx's error. WithStale, a stale value is
// returned at once and the loader runs after Cached returned, on a
// background context: its failure or panic then reaches nobody, and the
// next read past the stale window loads.
func (c *Client) Cached(ctx context.Context, key string, loader func(context.Context) ([]byte, error), opts ...Option) ([]byte, error) {
	set := settingsOf(opts)
	if set.lockOnly != "" {
		return nil, otherKind(key, set.lockOnly, "a lock", "Cached")
	}
	if loader == nil {
		return nil, &Error{Name: key, category: ErrInvalid, message: "rlock: Cached needs a loader (it is nil)"}
	}
	if err := checkContext(ctx, key); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// The client stays open until the rebuild this call may run is ended
	// (a finalizer closing it meanwhile would strand those waiting).
	defer runtime.KeepAlive(c)
	ckey := cString(key)
	defer freeString(ckey)
	token, done := request()
	id := call(func() C.uint64_t { return C.rlock_cache_read(c.handle, ckey, &set.cache, token) })
	if id == 0 {
		forget(token)
		return nil, errNotStarted
	}
	var o outcome
	select {
	case o = <-done:
	case <-ctx.Done():
		C.rlock_cancel(id)
		if o = <-done; o.code == codeCancelled {
			return nil, fmt.Errorf("rlock: reading %q: %w", key, ctx.Err())
		}
		if o.code == codeOK && o.value != 0 {
			// A rebuild handed over as the wait ended: the next caller runs it.
			C.rlock_rebuild_free(C.uint64_t(o.value))
			return nil, fmt.Errorf("rlock: reading %q: %w", key, ctx.Err())
		}
	}
	if o.code != codeOK {
		return nil, failure(key, o)
	}
	rebuild := C.uint64_t(o.value)
	switch o.count {
	case 1: // a load: this caller runs the loader
		return rebuildWith(ctx, key, rebuild, loader)
	case 2: // a refresh: the value now, the loader in the background
		go refresh(c, key, rebuild, loader)
	}
	return o.data, nil
}

// refresh runs a refresh's loader after Cached returned the stale value. A
// loader that fails or panics here has no caller to tell: the rebuild is
// ended (failed, or given up on a panic, which is not propagated: it
// would end the program), and the next read past the stale window loads.
func refresh(c *Client, key string, rebuild C.uint64_t, loader func(context.Context) ([]byte, error)) {
	defer runtime.KeepAlive(c)
	defer func() { _ = recover() }()
	_, _ = rebuildWith(context.Background(), key, rebuild, loader)
}

// rebuildWith runs loader and ends the rebuild with what it gives: its
// value stored, or its failure told to those waiting. A loader that panics
// gives the rebuild up (the next caller runs it) and panics on.
func rebuildWith(ctx context.Context, key string, rebuild C.uint64_t, loader func(context.Context) ([]byte, error)) ([]byte, error) {
	ended := false
	defer func() {
		if !ended {
			C.rlock_rebuild_free(rebuild)
		}
	}()
	value, err := loader(ctx)
	if err != nil && ctx.Err() != nil {
		// The caller went away: not a failure to share with the others,
		// one of whom rebuilds next.
		return nil, err
	}
	ended = true
	token, done := request()
	if err != nil {
		message := cString(err.Error())
		defer freeString(message)
		if call(func() C.int32_t { return C.rlock_rebuild_fail(rebuild, message, token) }) != C.RLOCK_OK {
			forget(token)
		} else {
			<-done
		}
		return nil, err
	}
	cvalue, cformat := cString(string(value)), cString(format)
	defer freeString(cvalue)
	defer freeString(cformat)
	if call(func() C.int32_t {
		return C.rlock_rebuild_store(rebuild, cvalue, C.bool(value != nil), cformat, token)
	}) != C.RLOCK_OK {
		forget(token)
		return value, nil
	}
	// Whether it was written or not, the loader's value is what was asked for.
	<-done
	return value, nil
}

// Invalidate deletes the cache entry key: every later read runs a loader.
// It reports whether there was an entry.
func (c *Client) Invalidate(ctx context.Context, key string) (bool, error) {
	if err := checkContext(ctx, key); err != nil {
		return false, err
	}
	defer runtime.KeepAlive(c)
	ckey := cString(key)
	defer freeString(ckey)
	token, done := request()
	if call(func() C.int32_t { return C.rlock_invalidate(c.handle, ckey, token) }) != C.RLOCK_OK {
		forget(token)
		return false, errNotStarted
	}
	select {
	case o := <-done:
		if o.code != codeOK {
			return false, failure(key, o)
		}
		return o.value == 1, nil
	case <-ctx.Done():
		return false, fmt.Errorf("rlock: invalidating %q: %w", key, ctx.Err())
	}
}
