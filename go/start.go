package rlock

// Hands the core the completion function (rlockComplete, bridge.go) and
// starts its runtime. A file of its own: cgo allows C definitions only in
// a file that exports no Go function.

/*
#include "rlock.h"
extern void rlockComplete(uint64_t token, RlockOutcome *outcome);
static void rlock_go_complete(uint64_t token, const RlockOutcome *outcome) {
	rlockComplete(token, (RlockOutcome *)outcome);
}
static int32_t rlock_go_init(void) { return rlock_init(rlock_go_complete); }
*/
import "C"

func init() {
	if C.rlock_go_init() != C.RLOCK_OK {
		panic("rlock: the core's runtime could not start")
	}
}
