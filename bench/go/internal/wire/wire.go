// Package wire is what the Go workers of the benchmark share with the
// others (bench/worker.py, bench/worker.js, rlock-bench): one JSON request
// per line on stdin, one JSON reply per line on stdout, and timestamps on
// CLOCK_MONOTONIC, the clock every worker reads, so that events of processes
// in four languages order on one clock.
package wire

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// Request is one request as the harness sent it.
type Request map[string]any

// Now is CLOCK_MONOTONIC in nanoseconds (Go's own monotonic reading is not
// exposed as a number).
func Now() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(err)
	}
	return ts.Nano()
}

// SleepUntil sleeps until the monotonic instant at (ns).
func SleepUntil(at int64) {
	if wait := at - Now(); wait > 0 {
		time.Sleep(time.Duration(wait))
	}
}

// Fields reads the fields a request must have; Err then names the first
// one missing.
type Fields struct {
	r   Request
	err error
}

// Fields of r.
func (r Request) Fields() *Fields { return &Fields{r: r} }

// Text is a string field ("" when missing).
func (f *Fields) Text(field string) string {
	s, ok := f.r[field].(string)
	if !ok {
		f.missing(field)
	}
	return s
}

// Number is an integer field (0 when missing).
func (f *Fields) Number(field string) int64 {
	n, ok := f.r[field].(float64)
	if !ok {
		f.missing(field)
	}
	return int64(n)
}

// Float is a number field (0 when missing).
func (f *Fields) Float(field string) float64 {
	n, ok := f.r[field].(float64)
	if !ok {
		f.missing(field)
	}
	return n
}

func (f *Fields) missing(field string) {
	if f.err == nil {
		f.err = fmt.Errorf("missing %s", field)
	}
}

// Err is the first field missing, if any.
func (f *Fields) Err() error { return f.err }

// NumberOr is an integer field, or def when absent.
func (r Request) NumberOr(field string, def int64) int64 {
	if n, ok := r[field].(float64); ok {
		return int64(n)
	}
	return def
}

// Serve answers each request with handle until stdin ends or a request
// says {"op": "exit"}; an error is answered as {"error": ...}.
func Serve(handle func(Request) (any, error)) {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<24)
	out := bufio.NewWriter(os.Stdout)
	for in.Scan() {
		var req Request
		var reply any
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			reply = map[string]string{"error": err.Error()}
		} else if req["op"] == "exit" {
			return
		} else if r, err := handle(req); err != nil {
			reply = map[string]string{"error": err.Error()}
		} else {
			reply = r
		}
		line, err := json.Marshal(reply)
		if err != nil {
			line, _ = json.Marshal(map[string]string{"error": err.Error()})
		}
		out.Write(line)
		out.WriteByte('\n')
		out.Flush()
	}
}
