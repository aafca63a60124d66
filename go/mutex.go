package rlock

/*
#include "rlock.h"
*/
import "C"

import "context"

// Mutex is the lock of one name. One Mutex value is one owner: locking it
// again while it holds nests (a re-entry, released by as many Unlocks), as
// in the other faces, where the owner is a thread or a task; two Mutex
// values of one name, in one process or many, exclude each other. Safe for
// concurrent use; goroutines sharing one Mutex share its holding.
type Mutex struct{ side *side }

// Mutex makes the lock name with opts. Bad options are returned by the
// first Lock or TryLock, before any I/O.
func (c *Client) Mutex(name string, opts ...Option) *Mutex {
	o, err := made(name, opts, func(cname C.RlockStr, args *C.RlockLockArgs, token C.uint64_t) C.int32_t {
		return C.rlock_mutex_new(c.handle, cname, args, token)
	})
	return &Mutex{newSide(c, name, o.value, err)}
}

// Name is the lock's name.
func (m *Mutex) Name() string { return m.side.name }

// Lock waits until the lock is held, or ctx is done: then it returns ctx's
// error (errors.Is(err, context.DeadlineExceeded) past a deadline), and the
// wait leaves no trace (no place in line, no lock taken).
func (m *Mutex) Lock(ctx context.Context) (*Held, error) { return m.side.acquire(ctx, false) }

// TryLock makes one attempt: errors.Is(err, ErrNotObtained) when someone
// else holds the lock.
func (m *Mutex) TryLock(ctx context.Context) (*Held, error) { return m.side.acquire(ctx, true) }
