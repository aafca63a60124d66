package rlock

import (
	"context"
	"errors"
	"fmt"
)

// The categories every face shares, for errors.Is. Each failure is an
// *Error naming the lock (errors.As for its fields).
var (
	// ErrNotObtained: TryLock found the lock held by someone else.
	ErrNotObtained = errors.New("rlock: lock not obtained")
	// ErrLost: the lease ended while the holder still ran.
	ErrLost = errors.New("rlock: lock lost")
	// ErrNotOwner: a release of a lock this holder does not hold.
	ErrNotOwner = errors.New("rlock: lock not held by this owner")
	// ErrConnection: Redis unreachable, authentication refused, or a protocol error.
	ErrConnection = errors.New("rlock: redis connection error")
	// ErrInvalid: bad input, refused before any I/O.
	ErrInvalid = errors.New("rlock: invalid argument")
	// ErrClosed: the client was closed.
	ErrClosed = errors.New("rlock: client closed")
	// ErrUpgrade: write asked by an owner that holds only read.
	ErrUpgrade = errors.New("rlock: upgrade refused")
	// ErrLoader: the loader of the cache rebuild this caller waited for failed.
	ErrLoader = errors.New("rlock: cache loader failed")
)

// Codes of ffi/include/rlock.h.
const (
	codeOK int32 = iota
	codeTimeout
	codeBusy
	codeNotOwner
	codeLost
	codeConnection
	codeInvalid
	codeClosed
	codeUpgrade
	codeLoader
	codeCancelled
	codeInternal
)

var categories = map[int32]error{
	codeTimeout:    ErrNotObtained,
	codeBusy:       ErrNotObtained,
	codeNotOwner:   ErrNotOwner,
	codeLost:       ErrLost,
	codeConnection: ErrConnection,
	codeInvalid:    ErrInvalid,
	codeClosed:     ErrClosed,
	codeUpgrade:    ErrUpgrade,
	codeLoader:     ErrLoader,
}

// Error is a failure of the core: its category (errors.Is), the lock it
// concerns, and for bad input the option at fault, for a lost lock the reason.
type Error struct {
	// Name is the lock's name ("" for a failure of the client).
	Name string
	// Option is the option at fault of bad input, as this package spells it
	// (WithTTL), or "".
	Option string
	// Reason is why a lock was lost or not owned (expired,
	// held_by_another, unreachable, max_hold, lease_ended, closed, forced), or "".
	Reason   string
	message  string
	category error
}

func (e *Error) Error() string { return e.message }

// Is reports whether target is e's category.
func (e *Error) Is(target error) bool { return target == e.category }

// Unwrap gives e's category.
func (e *Error) Unwrap() error { return e.category }

// failure is the *Error of a failed outcome about the lock name.
func failure(name string, o outcome) error {
	category := categories[o.code]
	if category == nil {
		category = fmt.Errorf("rlock: internal error (code %d)", o.code)
	}
	e := &Error{Name: name, category: category, message: "rlock: " + o.message}
	if o.code == codeInvalid && o.detail == "take" {
		o.detail = "permits"
	}
	switch o.code {
	case codeInvalid:
		if o.detail != "" {
			e.Option = optionName(o.detail)
			e.message = "rlock: " + e.Option + " " + o.message
		}
	case codeLost, codeNotOwner:
		e.Reason = o.detail
	}
	return e
}

// checkContext refuses a nil context, before any I/O.
func checkContext(ctx context.Context, what string) error {
	if ctx == nil {
		return &Error{Name: what, category: ErrInvalid, message: "rlock: a nil context.Context (use context.Background())"}
	}
	return nil
}

// otherKind is the error of an option given to what does not have it.
func otherKind(name, option, has, hasNot string) error {
	return &Error{Name: name, Option: option, category: ErrInvalid,
		message: "rlock: " + option + " is an option of " + has + ", not of " + hasNot}
}

// optionName spells the core's option names as this package's options.
func optionName(core string) string {
	switch core {
	case "ttl":
		return "WithTTL"
	case "auto_renew":
		return "WithoutAutoRenew"
	case "max_hold":
		return "WithMaxHold"
	case "sync_replicas":
		return "WithSyncReplicas"
	case "fair":
		return "WithFair"
	case "queue_after":
		return "WithQueueAfter"
	case "allow_long_ttl":
		return "WithLongTTL"
	case "stale":
		return "WithStale"
	case "none_ttl":
		return "WithNoneTTL"
	case "jitter":
		return "WithJitter"
	case "early":
		return "WithEarly"
	case "lock_ttl":
		return "WithLockTTL"
	}
	return core
}
