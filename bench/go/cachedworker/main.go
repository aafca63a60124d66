// The Go worker of S10 (`cached`): the JSON-lines protocol of
// bench/cached_worker.py (requests read, cold, seq), for the contenders
// cached:rlock (the Go face's client.Cached) and cached:rlock-stale (the
// same with a stale window). Each reader is a goroutine.
//
// The loader sleeps `loader_ms`, then RPUSHes "t0 t1 pid" to the `loads`
// list, and its value (JSON) carries t1, as in the other languages.
//
//	go_bench_cached_worker URL
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	rlock "github.com/redis-rlock/redis-rlock/go"

	"github.com/redis-rlock/redis-rlock/bench/go/internal/wire"
)

// reader is what a read needs: the client, the options and the loader's
// own connection.
type reader struct {
	client   *rlock.Client
	options  []rlock.Option
	loads    string
	loaderMs int64
	rdb      *redis.Client
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func newReader(client *rlock.Client, rdb *redis.Client, req wire.Request) (*reader, error) {
	f := req.Fields()
	options := []rlock.Option{rlock.WithTTL(seconds(f.Float("ttl")))}
	switch req["contender"] {
	case "cached:rlock":
	case "cached:rlock-stale":
		options = append(options, rlock.WithStale(seconds(f.Float("stale"))))
	default:
		return nil, fmt.Errorf("unknown contender %v", req["contender"])
	}
	r := &reader{client, options, f.Text("loads"), f.Number("loader_ms"), rdb}
	return r, f.Err()
}

// get is one read of key: the t1 of the value it got.
func (r *reader) get(key string) (int64, error) {
	ctx := context.Background()
	value, err := r.client.Cached(ctx, key, func(ctx context.Context) ([]byte, error) {
		t0 := wire.Now()
		time.Sleep(time.Duration(r.loaderMs) * time.Millisecond)
		t1 := wire.Now()
		if err := r.rdb.RPush(ctx, r.loads, fmt.Sprintf("%d %d %d", t0, t1, os.Getpid())).Err(); err != nil {
			return nil, err
		}
		return json.Marshal(map[string]int64{"t0": t0, "t1": t1})
	}, r.options...)
	if err != nil {
		return 0, err
	}
	var made struct{ T1 *int64 }
	if err := json.Unmarshal(value, &made); err != nil {
		return 0, err
	}
	if made.T1 == nil {
		return 0, errors.New("a value without t1")
	}
	return *made.T1, nil
}

// pause is uniform in [0, maxMs) milliseconds.
func pause(maxMs float64) time.Duration {
	return time.Duration(rand.Float64() * maxMs * float64(time.Millisecond))
}

// read: `readers` goroutines loop on `key` from `start` to `end`, each
// pausing a random 0 to 2 × `pace_ms` between reads: one record [began,
// ended, value's t1] per read.
func read(r *reader, req wire.Request) (any, error) {
	f := req.Fields()
	key, start, end := f.Text("key"), f.Number("start"), f.Number("end")
	pace, readers := f.Float("pace_ms"), f.Number("readers")
	if err := f.Err(); err != nil {
		return nil, err
	}
	var errs atomic.Int64
	recs := make([][][3]int64, readers)
	var wg sync.WaitGroup
	for i := range recs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wire.SleepUntil(start)
			time.Sleep(pause(pace))
			recs[i] = [][3]int64{}
			for {
				began := wire.Now()
				if began >= end {
					return
				}
				if t1, err := r.get(key); err != nil {
					errs.Add(1) // counted; the reader goes on
				} else {
					recs[i] = append(recs[i], [3]int64{began, wire.Now(), t1})
				}
				time.Sleep(pause(2 * pace))
			}
		}()
	}
	wg.Wait()
	rec := [][3]int64{}
	for _, r := range recs {
		rec = append(rec, r...)
	}
	return map[string]any{"rec": rec, "errors": errs.Load()}, nil
}

// cold: from `start`, `readers` goroutines share out keys prefix:0 to
// prefix:{keys - 1} in that order, each key read once by this process.
func cold(r *reader, req wire.Request) (any, error) {
	f := req.Fields()
	prefix, keys := f.Text("prefix"), f.Number("keys")
	start, readers := f.Number("start"), f.Number("readers")
	if err := f.Err(); err != nil {
		return nil, err
	}
	var next, errs atomic.Int64
	wire.SleepUntil(start)
	var wg sync.WaitGroup
	for range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= keys {
					return
				}
				if _, err := r.get(fmt.Sprintf("%s:%d", prefix, i)); err != nil {
					errs.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return map[string]any{"ended": wire.Now(), "errors": errs.Load()}, nil
}

// seq: `n` reads of `key` one after another (the harness counts what they send).
func seq(r *reader, req wire.Request) (any, error) {
	f := req.Fields()
	key, n := f.Text("key"), f.Number("n")
	if err := f.Err(); err != nil {
		return nil, err
	}
	lat := []int64{}
	for range n {
		t := wire.Now()
		if _, err := r.get(key); err != nil {
			return nil, err
		}
		lat = append(lat, wire.Now()-t)
	}
	return map[string]any{"lat": lat}, nil
}

func main() {
	url := os.Args[1]
	client, err := rlock.Connect(context.Background(), url)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	rdb := redis.NewClient(opts)
	wire.Serve(func(req wire.Request) (any, error) {
		r, err := newReader(client, rdb, req)
		if err != nil {
			return nil, err
		}
		switch req["op"] {
		case "read":
			return read(r, req)
		case "cold":
			return cold(r, req)
		case "seq":
			return seq(r, req)
		}
		return nil, fmt.Errorf("unknown op %v", req["op"])
	})
}
