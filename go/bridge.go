package rlock

// The crossing into the core's C ABI (ffi/include/rlock.h; include/rlock.h
// in the module as released, beside lib/<GOOS>_<GOARCH>/librlock.a, the
// core's static library for that platform): every request
// starts with a call that returns once the request only waits for something
// else than its own replies (a lock held elsewhere), and its outcome comes
// back through rlockComplete, called with the cgo.Handle of a func the
// request registered: on the calling thread before the call returns (a
// request of a round trip or two, which that thread drives itself), or
// later from the core's runtime thread. That func hands the outcome on
// without blocking (to a channel of one slot, or by closing one) and never
// calls into the core, so a goroutine that waits for a lock is parked on a
// channel and holds no OS thread.

/*
#cgo CFLAGS: -I${SRCDIR}/include -I${SRCDIR}/../ffi/include
#cgo linux,amd64 LDFLAGS: -L${SRCDIR}/lib/linux_amd64 -lrlock -lm -ldl -lpthread -lrt
#cgo linux,arm64 LDFLAGS: -L${SRCDIR}/lib/linux_arm64 -lrlock -lm -ldl -lpthread -lrt
#cgo darwin,amd64 LDFLAGS: -L${SRCDIR}/lib/darwin_amd64 -lrlock -framework CoreFoundation -framework Security
#cgo darwin,arm64 LDFLAGS: -L${SRCDIR}/lib/darwin_arm64 -lrlock -framework CoreFoundation -framework Security
#include <stdlib.h>
#include "rlock.h"
*/
import "C"

import (
	"runtime"
	"runtime/cgo"
	"unsafe"
)

// outcome is a request's result, copied out of the core's memory.
type outcome struct {
	code    int32
	value   uint64
	count   uint32
	other   uint64
	message string
	detail  string
	data    []byte // nil: none
}

//export rlockComplete
func rlockComplete(token C.uint64_t, out *C.RlockOutcome) {
	h := cgo.Handle(token)
	deliver := h.Value().(func(outcome))
	h.Delete()
	deliver(outcome{
		code:    int32(out.code),
		value:   uint64(out.value),
		count:   uint32(out.count),
		other:   uint64(out.other),
		message: goString(out.message),
		detail:  goString(out.detail),
		data:    goBytes(out.data, bool(out.has_data)),
	})
}

// calling bounds the goroutines inside a call into the core at once to the
// Ps that can run them: when thousands call in together (10,000 waiters
// starting), a call that waits on the core's tables would otherwise make
// the scheduler start an OS thread for each P it hands off; beyond this,
// a caller parks on the channel instead, holding no thread.
var calling = make(chan struct{}, runtime.GOMAXPROCS(0))

// call runs f, a call into the core, within that bound.
func call[T any](f func() T) T {
	calling <- struct{}{}
	defer func() { <-calling }()
	return f()
}

// request registers a completion and returns its token and the channel its
// outcome arrives on.
func request() (C.uint64_t, chan outcome) {
	ch := make(chan outcome, 1)
	return C.uint64_t(cgo.NewHandle(func(o outcome) { ch <- o })), ch
}

// notice registers a completion that calls f (which must not block).
func notice(f func(outcome)) C.uint64_t {
	return C.uint64_t(cgo.NewHandle(f))
}

// forget drops a completion the core will never call (a request it did not start).
func forget(token C.uint64_t) {
	cgo.Handle(token).Delete()
}

func goString(s C.RlockStr) string {
	if s.len == 0 {
		return ""
	}
	return C.GoStringN(s.ptr, C.int(s.len))
}

func goBytes(s C.RlockStr, has bool) []byte {
	if !has {
		return nil
	}
	if s.len == 0 {
		return []byte{}
	}
	return C.GoBytes(unsafe.Pointer(s.ptr), C.int(s.len))
}

// cString is a copy of s in C memory, for one call: free it after (cgo
// lets no Go pointer be kept in C memory, nor a pointer to Go memory that
// holds one be passed).
func cString(s string) C.RlockStr {
	if len(s) == 0 {
		return C.RlockStr{}
	}
	return C.RlockStr{ptr: C.CString(s), len: C.size_t(len(s))}
}

func freeString(s C.RlockStr) {
	if s.ptr != nil {
		C.free(unsafe.Pointer(s.ptr))
	}
}
