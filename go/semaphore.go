package rlock

/*
#include "rlock.h"
*/
import "C"

import (
	"context"
	"runtime"
	"sync"
)

// Semaphore is the semaphore of one name: at most its permits held at
// once, each holding under its own lease. One Semaphore value is one owner
// (acquiring again while it holds nests, whatever number of permits each
// acquisition takes); every user of the name gives the same number of
// permits (another is refused, ErrInvalid).
type Semaphore struct {
	name   string
	handle C.uint64_t // the core's semaphore, for its locks taking several permits
	side   *side      // taking one permit

	mu    sync.Mutex
	takes map[int]*side // taking several, made on first use
}

// Semaphore makes the semaphore name of permits permits; options are
// checked as Mutex's are.
func (c *Client) Semaphore(name string, permits int, opts ...Option) *Semaphore {
	o, err := made(name, opts, func(cname C.RlockStr, args *C.RlockLockArgs, token C.uint64_t) C.int32_t {
		return C.rlock_semaphore_new(c.handle, cname, C.int64_t(permits), args, token)
	})
	s := &Semaphore{name: name, handle: C.uint64_t(o.other), side: newSide(c, name, o.value, err), takes: map[int]*side{}}
	if err == nil {
		runtime.SetFinalizer(s, func(s *Semaphore) { C.rlock_semaphore_free(s.handle) })
	}
	return s
}

// Name is the semaphore's name.
func (s *Semaphore) Name() string { return s.side.name }

// Acquire waits until this owner holds a permit, or ctx is done.
func (s *Semaphore) Acquire(ctx context.Context) (*Held, error) { return s.side.acquire(ctx, false) }

// TryAcquire makes one attempt: ErrNotObtained when every permit is held.
func (s *Semaphore) TryAcquire(ctx context.Context) (*Held, error) { return s.side.acquire(ctx, true) }

// AcquireN waits until this owner holds n permits at once (1 to the
// semaphore's size, else ErrInvalid naming "permits"), or ctx is done.
func (s *Semaphore) AcquireN(ctx context.Context, n int) (*Held, error) {
	return s.taking(n).acquire(ctx, false)
}

// TryAcquireN makes one attempt at n permits: ErrNotObtained when fewer are free.
func (s *Semaphore) TryAcquireN(ctx context.Context, n int) (*Held, error) {
	return s.taking(n).acquire(ctx, true)
}

// taking is this owner's lock taking n permits at each acquisition.
func (s *Semaphore) taking(n int) *side {
	if n == 1 || s.side.err != nil {
		return s.side
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.takes[n]; !ok {
		token, done := request()
		if call(func() C.int32_t { return C.rlock_semaphore_permits(s.handle, C.int64_t(n), token) }) != C.RLOCK_OK {
			forget(token)
			s.takes[n] = &side{name: s.name, err: errNotStarted}
		} else if o := <-done; o.code != codeOK {
			s.takes[n] = &side{name: s.name, err: failure(s.name, o)}
		} else {
			s.takes[n] = newSide(s.side.client, s.name, o.value, nil)
		}
		runtime.KeepAlive(s)
	}
	return s.takes[n]
}
