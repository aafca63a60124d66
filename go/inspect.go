package rlock

/*
#include "rlock.h"
*/
import "C"

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"time"
)

// Inspection is what Inspect saw of a lock name: its mutex's holder and
// waiters (each with the process it runs in), and the holders of its
// read-write lock and semaphore. The same reading as every other face's
// (the command line's `rlock status --json`).
type Inspection struct {
	Name         string
	Held         bool          // the mutex is held
	Owner        string        // the mutex holder's owner id
	TTL          time.Duration // the mutex lease left
	Count        int           // the mutex holder's re-entries
	Fence        uint64        // the mutex holding's fencing token
	FenceCounter uint64        // the last token issued in the name's slot
	HeldFor      time.Duration // how long the mutex has been held
	Waiting      int           // waiters in the mutex's line
	Holder       *Party        // nil when the mutex is free
	Waiters      []Party
	RWLock       *RWLockState    // nil when nobody holds or waits on it
	Semaphore    *SemaphoreState // nil when nobody holds or waits on it
}

// Party is a holder or a waiter.
type Party struct {
	Owner    string
	ClientID string
	Unit     string      // the thread, task or handle within its client
	Client   *ClientInfo // nil when its client left no registration
	Waited   time.Duration
	// Of a read-write lock's or a semaphore's holding:
	Mode    string // read | write
	Permits int
	Count   int
	Fence   uint64
	TTL     time.Duration
}

// ClientInfo is what a client wrote about itself when it connected.
type ClientInfo struct {
	Host    string
	PID     int
	Process string // its command line, passwords hidden
	Face    string // python 3.11.4, node v20.11.0, go1.26.8, cli, rust
	Version string // the redis-rlock version
	Since   time.Time
}

// RWLockState is a read-write lock's holders and waiters.
type RWLockState struct {
	Readers int
	Writer  bool
	Waiting int
	HeldBy  []Party
}

// SemaphoreState is a semaphore's holders and waiters.
type SemaphoreState struct {
	Permits, Used, Free, Holders, Waiting int
	HeldBy                                []Party
}

// Inspect reads what the lock name looks like now.
func (c *Client) Inspect(ctx context.Context, name string) (*Inspection, error) {
	if err := checkContext(ctx, name); err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(c)
	cname := cString(name)
	defer freeString(cname)
	token, done := request()
	if call(func() C.int32_t { return C.rlock_inspect(c.handle, cname, token) }) != C.RLOCK_OK {
		forget(token)
		return nil, errNotStarted
	}
	select {
	case o := <-done:
		if o.code != codeOK {
			return nil, failure(name, o)
		}
		var seen inspection
		if err := json.Unmarshal(o.data, &seen); err != nil {
			return nil, fmt.Errorf("rlock: inspecting %q: %w", name, err)
		}
		return seen.public(), nil
	case <-ctx.Done():
		return nil, fmt.Errorf("rlock: inspecting %q: %w", name, ctx.Err())
	}
}

// The core's JSON of an inspection (core/src/inspect/json.rs).
type inspection struct {
	Name         string     `json:"name"`
	Held         bool       `json:"held"`
	Owner        string     `json:"owner"`
	TTLMs        int64      `json:"ttl_ms"`
	Count        int        `json:"count"`
	Fence        uint64     `json:"fence"`
	FenceCounter uint64     `json:"fence_counter"`
	HeldMs       int64      `json:"held_ms"`
	Waiting      int        `json:"waiting"`
	Holder       *party     `json:"holder"`
	Waiters      []party    `json:"waiters"`
	RWLock       *rwLock    `json:"rwlock"`
	Semaphore    *semaphore `json:"semaphore"`
}

type party struct {
	Owner    string  `json:"owner"`
	ClientID string  `json:"client_id"`
	Unit     string  `json:"unit"`
	Client   *client `json:"client"`
	WaitedMs int64   `json:"waited_ms"`
	Mode     string  `json:"mode"`
	Permits  int     `json:"permits"`
	Count    int     `json:"count"`
	Fence    uint64  `json:"fence"`
	TTLMs    int64   `json:"ttl_ms"`
}

type client struct {
	Host    string `json:"host"`
	PID     int    `json:"pid"`
	Process string `json:"process"`
	Face    string `json:"face"`
	Version string `json:"version"`
	SinceMs int64  `json:"since_ms"`
}

type rwLock struct {
	Readers int     `json:"readers"`
	Writer  bool    `json:"writer"`
	Waiting int     `json:"waiting"`
	HeldBy  []party `json:"held_by"`
}

type semaphore struct {
	Permits int     `json:"permits"`
	Used    int     `json:"used"`
	Free    int     `json:"free"`
	Holders int     `json:"holders"`
	Waiting int     `json:"waiting"`
	HeldBy  []party `json:"held_by"`
}

func millis(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

func (s *inspection) public() *Inspection {
	out := &Inspection{
		Name: s.Name, Held: s.Held, Owner: s.Owner, TTL: millis(s.TTLMs), Count: s.Count, Fence: s.Fence,
		FenceCounter: s.FenceCounter, HeldFor: millis(s.HeldMs), Waiting: s.Waiting, Waiters: parties(s.Waiters),
	}
	if s.Holder != nil {
		h := s.Holder.public()
		out.Holder = &h
	}
	if rw := s.RWLock; rw != nil {
		out.RWLock = &RWLockState{Readers: rw.Readers, Writer: rw.Writer, Waiting: rw.Waiting, HeldBy: parties(rw.HeldBy)}
	}
	if sem := s.Semaphore; sem != nil {
		out.Semaphore = &SemaphoreState{Permits: sem.Permits, Used: sem.Used, Free: sem.Free, Holders: sem.Holders,
			Waiting: sem.Waiting, HeldBy: parties(sem.HeldBy)}
	}
	return out
}

func parties(ps []party) []Party {
	out := make([]Party, len(ps))
	for i := range ps {
		out[i] = ps[i].public()
	}
	return out
}

func (p *party) public() Party {
	out := Party{Owner: p.Owner, ClientID: p.ClientID, Unit: p.Unit, Waited: millis(p.WaitedMs), Mode: p.Mode,
		Permits: p.Permits, Count: p.Count, Fence: p.Fence, TTL: millis(p.TTLMs)}
	if c := p.Client; c != nil {
		out.Client = &ClientInfo{Host: c.Host, PID: c.PID, Process: c.Process, Face: c.Face, Version: c.Version,
			Since: time.UnixMilli(c.SinceMs)}
	}
	return out
}
