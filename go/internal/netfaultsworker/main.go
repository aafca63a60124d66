// Command netfaultsworker is the Go worker of the network-fault suite
// (tests/netfaults): the same commands and records as its Python, Node and
// Rust workers (tests/netfaults/worker.py documents them), so one checker
// reads all four.
//
// One long-lived process runs schedule after schedule: each line on stdin is
// a JSON command ({"op": "run", ...} or {"op": "exit"}), answered with
// {"done": RUN} once every task of the run finished. Each task is a goroutine
// with its own Mutex (RWMutex, Semaphore) value, so its own owner. Rounds
// (one owner waiting again with another lease) are the Python and Rust
// workers', as in the Node worker: a Go lock's options are fixed when it is
// made, and another Mutex would be another owner. Stamps come from
// CLOCK_MONOTONIC, the clock the other workers read.
//
//	cd go && go build -o ../target/debug/go_netfaults_worker ./internal/netfaultsworker
package main

/*
#include <time.h>

static long long monotonic_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}
*/
import "C"

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"sync"
	"time"

	rlock "github.com/redis-rlock/redis-rlock/go"
)

// now is CLOCK_MONOTONIC in ns: Go's clock readings do not show it.
func now() int64 { return int64(C.monotonic_ns()) }

// task is one owner taking one lock again and again (worker.py documents
// each field).
type task struct {
	Task         string     `json:"task"`
	Name         string     `json:"name"`
	TTLMs        float64    `json:"ttl_ms"`
	AutoRenew    bool       `json:"auto_renew"`
	Fair         bool       `json:"fair"`
	TimeoutMs    *float64   `json:"timeout_ms"`
	Acquisitions int        `json:"acquisitions"`
	HoldMs       [2]float64 `json:"hold_ms"`
	GapMs        [2]float64 `json:"gap_ms"`
	StepMs       float64    `json:"step_ms"`
	Nest         bool       `json:"nest"`
	NestAtMs     float64    `json:"nest_at_ms"`
	NestRead     bool       `json:"nest_read"`
	Seed         int64      `json:"seed"`
	Kind         string     `json:"kind"`
	Sides        []string   `json:"sides"`
	Permits      int        `json:"permits"`
	Take         int        `json:"take"`
	Extend       bool       `json:"extend"`
	StartMs      float64    `json:"start_ms"`
	Crash        bool       `json:"crash"`
}

type command struct {
	Op      string          `json:"op"`
	Run     json.RawMessage `json:"run"`
	URL     json.RawMessage `json:"url"`
	Cluster bool            `json:"cluster"`
	Records string          `json:"records"`
	Tasks   []task          `json:"tasks"`
}

// records appends JSON lines to one file for every task of a run.
type records struct {
	mu   sync.Mutex
	file *os.File
}

func (r *records) add(t *task, fields map[string]any) {
	fields["k"], fields["n"] = t.Task, t.Name
	line, _ := json.Marshal(fields)
	r.mu.Lock()
	defer r.mu.Unlock()
	_, _ = r.file.Write(append(line, '\n'))
}

func outcome(err error) string {
	switch {
	case errors.Is(err, rlock.ErrLost):
		return "lost"
	case errors.Is(err, rlock.ErrNotOwner):
		return "notowned"
	}
	s := fmt.Sprintf("error:%T:%v", err, err)
	if len(s) > 300 {
		s = s[:300]
	}
	return s
}

// acquirer takes one side of the task's lock, waiting or once.
type acquirer func(ctx context.Context, once bool) (*rlock.Held, error)

// sides is the task's lock by side: a read-write lock's two, or one for
// both (a mutex, a semaphore's permits).
type sides struct{ read, write acquirer }

func (s sides) side(name string) acquirer {
	if name == "read" {
		return s.read
	}
	return s.write
}

func pick(wait, once func(context.Context) (*rlock.Held, error)) acquirer {
	return func(ctx context.Context, try bool) (*rlock.Held, error) {
		if try {
			return once(ctx)
		}
		return wait(ctx)
	}
}

// makeSides makes the task's lock with a lease of ttlMs, or says why it was refused.
func makeSides(ctx context.Context, client *rlock.Client, t *task, ttlMs float64) (sides, error) {
	opts := []rlock.Option{rlock.WithTTL(time.Duration(ttlMs * float64(time.Millisecond)))}
	if !t.AutoRenew {
		opts = append(opts, rlock.WithoutAutoRenew())
	}
	if t.Fair {
		opts = append(opts, rlock.WithFair())
	}
	var s sides
	switch t.Kind {
	case "rw":
		rw := client.RWMutex(t.Name, opts...)
		s = sides{read: pick(rw.RLock, rw.TryRLock), write: pick(rw.Lock, rw.TryLock)}
	case "semaphore":
		sem := client.Semaphore(t.Name, t.Permits, opts...)
		take := t.Take
		one := pick(func(ctx context.Context) (*rlock.Held, error) { return sem.AcquireN(ctx, take) },
			func(ctx context.Context) (*rlock.Held, error) { return sem.TryAcquireN(ctx, take) })
		s = sides{read: one, write: one}
	default:
		m := client.Mutex(t.Name, opts...)
		one := pick(m.Lock, m.TryLock)
		s = sides{read: one, write: one}
	}
	// A refused lock says so on its first use; a try with a done context
	// asks nothing of Redis.
	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.write(done, true); err != nil && !errors.Is(err, context.Canceled) {
		return s, err
	}
	return s, nil
}

func millis(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }

func uniform(rng *rand.Rand, span [2]float64) float64 {
	return span[0] + (span[1]-span[0])*rng.Float64()
}

func runTask(client *rlock.Client, t *task, out *records) {
	ctx := context.Background()
	rng := rand.New(rand.NewSource(t.Seed))
	rec := func(fields map[string]any) { out.add(t, fields) }
	lock, err := makeSides(ctx, client, t, t.TTLMs)
	if err != nil {
		rec(map[string]any{"e": "refused", "t": now(), "what": outcome(err)})
		return
	}
	if t.StartMs > 0 {
		time.Sleep(millis(t.StartMs))
	}
	for i := 0; i < t.Acquisitions; i++ {
		ttl, timeout, holdMs := t.TTLMs, t.TimeoutMs, t.HoldMs
		side := ""
		if i < len(t.Sides) {
			side = t.Sides[i]
		}
		acquire := lock.side(side)
		inner := acquire
		if t.NestRead {
			inner = lock.side("read")
		}
		if side != "" {
			rec(map[string]any{"e": "wait", "t": now(), "side": side})
		} else {
			rec(map[string]any{"e": "wait", "t": now()})
		}
		waitCtx, cancel := ctx, context.CancelFunc(func() {})
		if timeout != nil {
			waitCtx, cancel = context.WithTimeout(ctx, millis(*timeout))
		}
		held, err := acquire(waitCtx, false)
		cancel()
		switch {
		case errors.Is(err, rlock.ErrNotObtained), errors.Is(err, context.DeadlineExceeded):
			rec(map[string]any{"e": "waited", "t": now(), "out": "timeout"})
			continue
		case err != nil:
			rec(map[string]any{"e": "waited", "t": now(), "out": outcome(err)})
			continue
		}
		tok := held.FencingToken()
		rec(map[string]any{"e": "enter", "tok": tok, "t": now()})
		hold := int64(uniform(rng, holdMs) * 1e6)
		entered := now()
		end, middle := entered+hold, entered+hold/2
		var nested *rlock.Held
		halfway := false
		// When the nested acquire comes (-1: none, or done).
		nestAt := int64(-1)
		if t.Nest {
			nestAt = entered + int64(t.NestAtMs*1e6)
		}
		// Read from the core's clock, as the other workers' checks are: the
		// notice that closes Lost may come a little later.
		lost := func() bool { return errors.Is(held.Err(), rlock.ErrLost) }
		for {
			if nestAt >= 0 && now() >= nestAt {
				nestAt = -1
				again, err := inner(ctx, true)
				if err != nil {
					rec(map[string]any{"e": "note", "t": now(), "what": "nested acquire: " + outcome(err)})
				}
				// Either outcome may have reset the lease in Redis: it runs
				// at most its length from here.
				record := map[string]any{"e": "nested", "tok": tok, "t": now()}
				if err == nil {
					nested = again
					record["re"] = true
				}
				rec(record)
			}
			at := now()
			if lost() {
				rec(map[string]any{"e": "lost", "tok": tok, "t": now()})
				break
			}
			rec(map[string]any{"e": "step", "tok": tok, "t": at})
			if at >= end {
				break
			}
			if !halfway && at >= middle {
				halfway = true
				if nested != nil {
					if err := nested.Unlock(ctx); err != nil {
						rec(map[string]any{"e": "note", "t": now(), "what": "nested release: " + outcome(err)})
					}
					nested = nil
					rec(map[string]any{"e": "nested", "tok": tok, "t": now()})
				}
				if t.Extend {
					if err := held.Extend(ctx, millis(ttl)); err != nil {
						rec(map[string]any{"e": "note", "t": now(), "what": "extend: " + outcome(err)})
					}
					rec(map[string]any{"e": "nested", "tok": tok, "t": now()})
				}
			}
			time.Sleep(millis(t.StepMs))
		}
		if t.Crash && lost() {
			// A crashed holder never lets go: its lease runs out in Redis.
			rec(map[string]any{"e": "exit", "tok": tok, "t": now(), "out": "lost"})
			continue
		}
		rec(map[string]any{"e": "rel", "tok": tok, "t": now()})
		result := "released"
		if nested != nil {
			if err := nested.Unlock(ctx); err != nil {
				result = outcome(err)
			}
		}
		if result == "released" {
			if err := held.Unlock(ctx); err != nil {
				result = outcome(err)
			}
		}
		rec(map[string]any{"e": "exit", "tok": tok, "t": now(), "out": result})
		if gap := uniform(rng, t.GapMs); gap > 0 {
			time.Sleep(millis(gap))
		}
	}
}

func connect(raw json.RawMessage, cluster bool) (*rlock.Client, error) {
	var urls []string
	if err := json.Unmarshal(raw, &urls); err != nil {
		var url string
		if err := json.Unmarshal(raw, &url); err != nil {
			return nil, fmt.Errorf("url: a string or a list: %w", err)
		}
		urls = []string{url}
	}
	if len(urls) == 0 {
		return nil, errors.New("url: no URL")
	}
	opts := []rlock.ClientOption{rlock.WithURLs(urls[1:]...)}
	if cluster {
		opts = append(opts, rlock.WithCluster())
	}
	return rlock.Connect(context.Background(), urls[0], opts...)
}

func main() {
	// One client per deployment for the life of the process, as an
	// application keeps one: faults hit its connections, it reconnects.
	clients := map[string]*rlock.Client{}
	reply := func(v any) {
		line, _ := json.Marshal(v)
		fmt.Println(string(line))
	}
	reply(map[string]any{"ready": true})
	input := bufio.NewScanner(os.Stdin)
	input.Buffer(make([]byte, 1<<20), 1<<26)
	for input.Scan() {
		var cmd command
		if err := json.Unmarshal(input.Bytes(), &cmd); err != nil {
			fmt.Fprintln(os.Stderr, "bad command:", err)
			os.Exit(2)
		}
		if cmd.Op == "exit" {
			break
		}
		file, err := os.OpenFile(cmd.Records, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			fmt.Fprintln(os.Stderr, "records:", err)
			os.Exit(2)
		}
		out := &records{file: file}
		key := fmt.Sprintf("%s%v", cmd.URL, cmd.Cluster)
		client, ok := clients[key]
		if !ok {
			if client, err = connect(cmd.URL, cmd.Cluster); err != nil {
				// A fault can hit the first connection too: every task's
				// wait ends with that error, and the next run tries again.
				for i := range cmd.Tasks {
					out.add(&cmd.Tasks[i], map[string]any{"e": "wait", "t": now()})
					out.add(&cmd.Tasks[i], map[string]any{"e": "waited", "t": now(), "out": "error:connect:" + err.Error()})
				}
				_ = file.Close()
				reply(map[string]json.RawMessage{"done": cmd.Run})
				continue
			}
			clients[key] = client
		}
		var wg sync.WaitGroup
		for i := range cmd.Tasks {
			wg.Add(1)
			go func(t *task) {
				defer wg.Done()
				runTask(client, t, out)
			}(&cmd.Tasks[i])
		}
		wg.Wait()
		_ = file.Close()
		reply(map[string]json.RawMessage{"done": cmd.Run})
	}
	for _, c := range clients {
		_ = c.Close()
	}
}
