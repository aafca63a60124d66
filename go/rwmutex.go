package rlock

/*
#include "rlock.h"
*/
import "C"

import "context"

// RWMutex is the read-write lock of one name: any number of readers, or
// one writer. One RWMutex value is one owner of both sides: a read inside
// its write nests (a downgrade: write, read, unlock the write, lets no
// writer in between); a write asked while it holds only the read is
// refused at once (errors.Is(err, ErrUpgrade)), as two upgraders would wait
// on each other for ever. A waiting writer holds new readers back.
type RWMutex struct{ write, read *side }

// RWMutex makes the read-write lock name with opts, checked as Mutex's are.
func (c *Client) RWMutex(name string, opts ...Option) *RWMutex {
	o, err := made(name, opts, func(cname C.RlockStr, args *C.RlockLockArgs, token C.uint64_t) C.int32_t {
		return C.rlock_rwlock_new(c.handle, cname, args, token)
	})
	return &RWMutex{write: newSide(c, name, o.value, err), read: newSide(c, name, o.other, err)}
}

// Name is the lock's name.
func (rw *RWMutex) Name() string { return rw.write.name }

// Lock waits until this owner writes (nobody else inside), or ctx is done.
func (rw *RWMutex) Lock(ctx context.Context) (*Held, error) { return rw.write.acquire(ctx, false) }

// TryLock makes one attempt to write: ErrNotObtained when anyone else is inside.
func (rw *RWMutex) TryLock(ctx context.Context) (*Held, error) { return rw.write.acquire(ctx, true) }

// RLock waits until this owner reads (no writer inside or waiting), or ctx is done.
func (rw *RWMutex) RLock(ctx context.Context) (*Held, error) { return rw.read.acquire(ctx, false) }

// TryRLock makes one attempt to read: ErrNotObtained when a writer is inside or waiting.
func (rw *RWMutex) TryRLock(ctx context.Context) (*Held, error) { return rw.read.acquire(ctx, true) }
