package rlock

/*
#include "rlock.h"
*/
import "C"

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// side is one lock that one owner acquires and releases: a Mutex, one side
// of an RWMutex, a Semaphore's permits. Goroutines sharing it share its
// holding (a second acquisition while held nests), and each acquisition is
// told of that holding's loss on its own.
type side struct {
	client *Client // kept alive while its locks are: its finalizer closes it
	name   string
	handle C.uint64_t
	err    error // the options refused, returned by every acquisition

}

// holding is one fresh acquisition and its re-entries.
type holding struct {
	fence  uint64
	lost   chan struct{} // closed when the lease is lost
	reason error         // why, set before lost is closed
}

// Held is one acquisition of a lock: Unlock it once.
type Held struct {
	side     *side
	holding  *holding
	once     sync.Once
	unlocked atomic.Bool
}

// errNotStarted: the core refused to start a request (a handle freed, or
// its runtime not running), and nothing will complete.
var errNotStarted = fmt.Errorf("rlock: the request was not started: the lock's handle was freed, or the core's runtime is not running")

// made is the outcome of a call that makes the lock name with opts
// (rlock_*_new): start starts it with the name, the options and a token,
// and it completes before returning.
func made(name string, opts []Option, start func(C.RlockStr, *C.RlockLockArgs, C.uint64_t) C.int32_t) (outcome, error) {
	set := settingsOf(opts)
	if set.cacheOnly != "" {
		return outcome{}, otherKind(name, set.cacheOnly, "Cached", "a lock")
	}
	args := set.lock
	cname := cString(name)
	defer freeString(cname)
	token, done := request()
	if call(func() C.int32_t { return start(cname, &args, token) }) != C.RLOCK_OK {
		forget(token)
		return outcome{}, errNotStarted
	}
	o := <-done
	if o.code != codeOK {
		return o, failure(name, o)
	}
	return o, nil
}

// newSide is the side of the lock handle h of c (0 with err: the lock was refused).
func newSide(c *Client, name string, h uint64, err error) *side {
	s := &side{client: c, name: name, handle: C.uint64_t(h), err: err}
	if err == nil {
		runtime.SetFinalizer(s, func(s *side) { C.rlock_lock_free(s.handle) })
	}
	return s
}

func (s *side) acquire(ctx context.Context, once bool) (*Held, error) {
	if s.err != nil {
		return nil, s.err
	}
	if err := checkContext(ctx, s.name); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	held := &holding{lost: make(chan struct{})}
	lostToken := notice(func(o outcome) {
		if o.code == codeLost {
			held.reason = failure(s.name, o)
			close(held.lost)
		}
	})
	token, done := request()
	id := call(func() C.uint64_t { return C.rlock_lock_acquire(s.handle, C.bool(once), token, lostToken) })
	runtime.KeepAlive(s)
	if id == 0 {
		forget(token)
		forget(lostToken)
		return nil, errNotStarted
	}
	var o outcome
	select {
	case o = <-done:
	case <-ctx.Done():
		C.rlock_cancel(id)
		// The outcome comes either way: cancelled, or what came first.
		if o = <-done; o.code == codeCancelled {
			return nil, fmt.Errorf("rlock: waiting for %q: %w", s.name, ctx.Err())
		}
	}
	if o.code != codeOK {
		return nil, failure(s.name, o)
	}
	held.fence = o.value
	return &Held{side: s, holding: held}, nil
}

// FencingToken is the holding's token: larger on every fresh acquisition
// of the name, the same for its re-entries. Pass it to what the lock
// protects, so a write from a holder whose lease ended can be refused.
func (h *Held) FencingToken() uint64 { return h.holding.fence }

// Lost is closed the moment the lease is lost (it expired unrenewed,
// another holder took it, the client closed): stop working on what the
// lock protects.
func (h *Held) Lost() <-chan struct{} { return h.holding.lost }

// Err is nil while the lease runs and an *Error (errors.Is(err, ErrLost))
// once it is lost, read at once from the core and its clock: a lease past
// its end counts as lost even before the notice that closes Lost has
// arrived, so a holder that checks Err before each step of its work never
// steps past its lease, however late its renewal loop runs. A holding lost
// stays lost; after Unlock it is ErrNotOwner. It reads the holding this
// Mutex (RWMutex side, Semaphore) value has now, which goroutines sharing
// the value share.
func (h *Held) Err() error {
	select {
	case <-h.holding.lost:
		return h.holding.reason
	default:
	}
	if h.unlocked.Load() {
		return errAgain(h.side.name)
	}
	code := C.rlock_lock_lost(h.side.handle)
	runtime.KeepAlive(h)
	if code == C.RLOCK_LOST {
		return &Error{Name: h.side.name, category: ErrLost,
			message: fmt.Sprintf("rlock: %q: the lease ended", h.side.name)}
	}
	return nil
}

// Context is a copy of parent cancelled when the lease is lost, with the
// *Error (errors.Is(err, ErrLost)) as its cause (context.Cause).
func (h *Held) Context(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	go func() {
		select {
		case <-h.holding.lost:
			cancel(h.holding.reason)
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancel(context.Canceled) }
}

// Extend resets the holding's lease to ttl (renewals keep it from then
// on): errors.Is(err, ErrLost) when it was lost already, ErrNotOwner after
// Unlock. Meant for a lock WithoutAutoRenew; a renewed lock needs none.
func (h *Held) Extend(ctx context.Context, ttl time.Duration) error {
	if err := checkContext(ctx, h.side.name); err != nil {
		return err
	}
	token, done := request()
	if call(func() C.int32_t { return C.rlock_lock_extend(h.side.handle, ms(ttl), true, token) }) != C.RLOCK_OK {
		forget(token)
		return errNotStarted
	}
	runtime.KeepAlive(h)
	select {
	case o := <-done:
		if o.code != codeOK {
			return failure(h.side.name, o)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("rlock: extending %q: %w", h.side.name, ctx.Err())
	}
}

// Unlock gives back this acquisition (the lock with the last of its
// re-entries): errors.Is(err, ErrLost) when the lease was lost meanwhile.
// Unlocking it again is ErrNotOwner, with nothing sent. The release goes
// on if ctx is done first; Unlock then returns ctx's error.
func (h *Held) Unlock(ctx context.Context) error {
	if err := checkContext(ctx, h.side.name); err != nil {
		return err
	}
	err := errAgain(h.side.name)
	h.once.Do(func() { h.unlocked.Store(true); err = h.side.release(ctx) })
	return err
}

func errAgain(name string) error {
	return &Error{Name: name, category: ErrNotOwner, message: fmt.Sprintf("rlock: %q: this acquisition was unlocked already", name)}
}

func (s *side) release(ctx context.Context) error {
	token, done := request()
	if call(func() C.int32_t { return C.rlock_lock_release(s.handle, token) }) != C.RLOCK_OK {
		forget(token)
		return errNotStarted
	}
	runtime.KeepAlive(s)
	select {
	case o := <-done:
		if o.code != codeOK {
			return failure(s.name, o)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("rlock: releasing %q: %w", s.name, ctx.Err())
	}
}
