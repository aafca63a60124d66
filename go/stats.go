package rlock

/*
#include "rlock.h"
*/
import "C"

import (
	"encoding/json"
	"runtime"
	"time"
)

// Stats are a client's counters since it connected, as every face counts
// them.
type Stats struct {
	Acquisitions          uint64            // granted (a re-entry counts)
	ContendedAcquisitions uint64            // of them, those whose first attempt found the lock busy
	Timeouts              uint64            // acquisitions that gave up at their deadline
	Releases              uint64            // holdings released whole
	Renewals              uint64            // holdings renewed by the watchdog
	RenewalRoundTrips     uint64            // the round trips those renewals took
	RenewalFailures       uint64            // renewals Redis did not confirm in time
	Lost                  map[string]uint64 // leases lost, by reason
	Reconnects            uint64
	Wait, Hold            Timings // from call to grant; from grant to release
}

// Timings is a histogram of durations.
type Timings struct {
	Count uint64
	Sum   time.Duration
	// Buckets are (upper bound, how many were at most it), the last bound
	// 0 for +Inf.
	Buckets []Bucket
}

// Bucket is one bound of a histogram and how many durations were at most it.
type Bucket struct {
	LE         time.Duration // 0: +Inf
	Cumulative uint64
}

// Stats reads the client's counters (no I/O).
func (c *Client) Stats() Stats {
	var s Stats
	token, done := request()
	if call(func() C.int32_t { return C.rlock_stats(c.handle, token) }) != C.RLOCK_OK {
		forget(token)
		return s
	}
	runtime.KeepAlive(c)
	var wire struct {
		Acquisitions          uint64            `json:"acquisitions"`
		ContendedAcquisitions uint64            `json:"contended_acquisitions"`
		Timeouts              uint64            `json:"timeouts"`
		Releases              uint64            `json:"releases"`
		Renewals              uint64            `json:"renewals"`
		RenewalRoundTrips     uint64            `json:"renewal_round_trips"`
		RenewalFailures       uint64            `json:"renewal_failures"`
		Lost                  map[string]uint64 `json:"lost"`
		Reconnects            uint64            `json:"reconnects"`
		Wait                  timings           `json:"wait"`
		Hold                  timings           `json:"hold"`
	}
	if json.Unmarshal((<-done).data, &wire) != nil {
		return s
	}
	return Stats{
		Acquisitions: wire.Acquisitions, ContendedAcquisitions: wire.ContendedAcquisitions, Timeouts: wire.Timeouts,
		Releases: wire.Releases, Renewals: wire.Renewals, RenewalRoundTrips: wire.RenewalRoundTrips,
		RenewalFailures: wire.RenewalFailures, Lost: wire.Lost, Reconnects: wire.Reconnects,
		Wait: wire.Wait.public(), Hold: wire.Hold.public(),
	}
}

// The core's JSON of a histogram: {count, sum_ms, buckets: [[le_seconds | null, cumulative]...]}.
type timings struct {
	Count   uint64       `json:"count"`
	SumMs   float64      `json:"sum_ms"`
	Buckets [][2]float64 `json:"buckets"`
}

func (t timings) public() Timings {
	out := Timings{Count: t.Count, Sum: time.Duration(t.SumMs * float64(time.Millisecond))}
	for _, b := range t.Buckets {
		out.Buckets = append(out.Buckets, Bucket{LE: time.Duration(b[0] * float64(time.Second)), Cumulative: uint64(b[1])})
	}
	return out
}
