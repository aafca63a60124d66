// The Go worker of the benchmark: the JSON-lines protocol of bench/worker.py
// (requests s1, s2, s7, idle), for the contenders
//
//	floor        go-redis sending the bare cycle: SET NX PX, then EVALSHA compare-and-delete
//	rlock        redis-rlock's Go face; rlock-fair: in fair mode
//	redsync      go-redsync/redsync v4 over go-redis, its defaults (32 tries, 50-250 ms apart)
//	redislock    bsm/redislock, retrying every 100 ms (its README's LinearBackoff)
//	sem:rlock    one permit of a redis-rlock semaphore of `permits` permits
//	read:rlock, write:rlock  the two sides of a redis-rlock read-write lock
//
// Each loop of s2 and s7 is a goroutine, the way Go code using a lock runs.
//
//	go_bench_worker URL [URL...]
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	rlock "github.com/redis-rlock/redis-rlock/go"

	"github.com/redis-rlock/redis-rlock/bench/go/internal/wire"
)

// compareAndDelete is the floor's release (the same text in every worker).
const compareAndDelete = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"

const token = "rlock-bench-floor"

// A lease long enough that no holding of a block ends by it.
const ttl = 30 * time.Second

// The lease of the holders and waiters of `idle`.
const long = 60 * time.Second

var urls = os.Args[1:]

// shared is what every contender of this process uses: one redis-rlock
// client, one go-redis client.
var shared struct {
	once   sync.Once
	client *rlock.Client
	rdb    *redis.Client
	sha    string
	err    error
}

func connect() error {
	shared.once.Do(func() {
		ctx := context.Background()
		shared.client, shared.err = rlock.Connect(ctx, urls[0], rlock.WithURLs(urls[1:]...))
		if shared.err != nil {
			return
		}
		opts, err := redis.ParseURL(urls[0])
		if err != nil {
			shared.err = err
			return
		}
		shared.rdb = redis.NewClient(opts)
		shared.sha, shared.err = shared.rdb.ScriptLoad(ctx, compareAndDelete).Result()
	})
	return shared.err
}

// contender is one lock on one key: acquire waits until held (the floor
// makes one attempt: it only runs uncontended).
type contender interface {
	acquire(ctx context.Context) (bool, error)
	release(ctx context.Context) error
}

// held is any of redis-rlock's locks: the call that takes it, and the
// holding it gave.
type held struct {
	take    func(context.Context) (*rlock.Held, error)
	holding *rlock.Held
}

func (h *held) acquire(ctx context.Context) (bool, error) {
	g, err := h.take(ctx)
	if err != nil {
		return false, err
	}
	h.holding = g
	return true, nil
}

func (h *held) release(ctx context.Context) error { return h.holding.Unlock(ctx) }

type floor struct{ key string }

func (f floor) acquire(ctx context.Context) (bool, error) {
	err := shared.rdb.Do(ctx, "SET", f.key, token, "NX", "PX", ttl.Milliseconds()).Err()
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	return err == nil, err
}

func (f floor) release(ctx context.Context) error {
	n, err := shared.rdb.EvalSha(ctx, shared.sha, []string{f.key}, token).Int()
	if err == nil && n != 1 {
		err = errors.New("floor: the key was not ours")
	}
	return err
}

type sync4 struct{ m *redsync.Mutex }

func (s sync4) acquire(ctx context.Context) (bool, error) { return true, s.m.LockContext(ctx) }

func (s sync4) release(ctx context.Context) error {
	ok, err := s.m.UnlockContext(ctx)
	if err == nil && !ok {
		err = errors.New("redsync: not released")
	}
	return err
}

type bsm struct {
	locker *redislock.Client
	key    string
	ttl    time.Duration
	lock   *redislock.Lock
}

func (b *bsm) acquire(ctx context.Context) (bool, error) {
	l, err := b.locker.Obtain(ctx, b.key, b.ttl, &redislock.Options{
		RetryStrategy: redislock.LinearBackoff(100 * time.Millisecond),
	})
	if err != nil {
		return false, err
	}
	b.lock = l
	return true, nil
}

func (b *bsm) release(ctx context.Context) error { return b.lock.Release(ctx) }

func newContender(name, key string, permits int) (contender, error) {
	return newContenderFor(name, key, permits, ttl)
}

// newContenderFor is newContender with a lease of its own.
func newContenderFor(name, key string, permits int, ttl time.Duration) (contender, error) {
	if err := connect(); err != nil {
		return nil, err
	}
	c, lease := shared.client, rlock.WithTTL(ttl)
	switch name {
	case "rlock":
		return &held{take: c.Mutex(key, lease).Lock}, nil
	case "rlock-fair":
		return &held{take: c.Mutex(key, lease, rlock.WithFair()).Lock}, nil
	case "sem:rlock":
		return &held{take: c.Semaphore(key, permits, lease).Acquire}, nil
	case "read:rlock":
		return &held{take: c.RWMutex(key, lease).RLock}, nil
	case "write:rlock":
		return &held{take: c.RWMutex(key, lease).Lock}, nil
	case "floor":
		return floor{key}, nil
	case "redsync":
		rs := redsync.New(goredis.NewPool(shared.rdb))
		return sync4{rs.NewMutex(key, redsync.WithExpiry(ttl))}, nil
	case "redislock":
		return &bsm{locker: redislock.New(shared.rdb), key: key, ttl: ttl}, nil
	}
	return nil, fmt.Errorf("unknown contender %q", name)
}

func main() {
	wire.Serve(func(req wire.Request) (any, error) {
		switch req["op"] {
		case "s1":
			return s1(req)
		case "s2":
			return s2(req)
		case "s7":
			return s7(req)
		case "idle":
			return idle(req)
		}
		return nil, fmt.Errorf("unknown op %v", req["op"])
	})
}

// s1: `n` uncontended acquire + release cycles, the latency of each. With
// `pair`, that contender's cycles alternate with them in chunks of `chunk`
// (its latencies come back as pair_lat).
func s1(req wire.Request) (any, error) {
	f := req.Fields()
	name, key, n := f.Text("contender"), f.Text("key"), f.Number("n")
	if err := f.Err(); err != nil {
		return nil, err
	}
	chunk := max(req.NumberOr("chunk", n), 1)
	c, err := newContender(name, key, int(req.NumberOr("permits", 1)))
	if err != nil {
		return nil, err
	}
	runs := []contender{c}
	if pair, ok := req["pair"].(string); ok {
		p, err := newContender(pair, key+":pair", 1)
		if err != nil {
			return nil, err
		}
		runs = []contender{c, p}
	}
	ctx := context.Background()
	lat := [2][]int64{{}, {}}
	var wall [2]int64
	for done := int64(0); done < n; {
		k := min(chunk, n-done)
		// The pair first, as the other workers run it.
		for i := len(runs) - 1; i >= 0; i-- {
			start := wire.Now()
			for range k {
				t := wire.Now()
				ok, err := runs[i].acquire(ctx)
				if err != nil {
					return nil, err
				}
				if !ok {
					return nil, errors.New("uncontended acquire failed")
				}
				if err := runs[i].release(ctx); err != nil {
					return nil, err
				}
				lat[i] = append(lat[i], wire.Now()-t)
			}
			wall[i] += wire.Now() - start
		}
		done += k
	}
	return map[string]any{"lat": lat[0], "pair_lat": lat[1], "wall": wall[0], "pair_wall": wall[1]}, nil
}

// loopArgs are what s2 and s7 share: contender, key, warm key, start, end.
type loopArgs struct {
	name, key, warm string
	start, end      int64
}

func loopRequest(req wire.Request) (loopArgs, error) {
	f := req.Fields()
	a := loopArgs{name: f.Text("contender"), key: f.Text("key"), warm: f.Text("warm"),
		start: f.Number("start"), end: f.Number("end")}
	return a, f.Err()
}

// warmUp takes and gives back a lock on another key, so that connections
// and scripts are ready before the block starts.
func warmUp(name, key string, permits int) error {
	w, err := newContender(name, key, permits)
	if err != nil {
		return err
	}
	ctx := context.Background()
	if _, err := w.acquire(ctx); err != nil {
		return err
	}
	return w.release(ctx)
}

// s2: acquire / hold / release from `start` until `end`. With `counter`,
// the hold increments a shared non-atomic counter (a file); `hold_ms`
// sleeps inside, `pause_ms` after each release. One record [wanted,
// acquired, releasing, released] per acquisition.
func s2(req wire.Request) (any, error) {
	a, err := loopRequest(req)
	if err != nil {
		return nil, err
	}
	permits := int(req.NumberOr("permits", 1))
	var counter *os.File
	if path, ok := req["counter"].(string); ok {
		if counter, err = os.OpenFile(path, os.O_RDWR, 0); err != nil {
			return nil, err
		}
		defer counter.Close()
	}
	hold := time.Duration(req.NumberOr("hold_ms", 0)) * time.Millisecond
	pause := time.Duration(req.NumberOr("pause_ms", 0)) * time.Millisecond
	if err := warmUp(a.name, a.warm, permits); err != nil {
		return nil, err
	}
	c, err := newContender(a.name, a.key, permits)
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	wire.SleepUntil(a.start)
	records := [][4]int64{}
	errs := 0
	for {
		wanted := wire.Now()
		if wanted >= a.end {
			break
		}
		for {
			if ok, err := c.acquire(ctx); ok && err == nil {
				break
			}
			errs++
		}
		acquired := wire.Now()
		if counter != nil {
			// Non-atomic: two holders at once would lose an increment.
			var buf [8]byte
			if _, err := counter.ReadAt(buf[:], 0); err != nil {
				return nil, err
			}
			n := uint64(0)
			for i := 7; i >= 0; i-- {
				n = n<<8 | uint64(buf[i])
			}
			n++
			for i := range buf {
				buf[i] = byte(n >> (8 * i))
			}
			if _, err := counter.WriteAt(buf[:], 0); err != nil {
				return nil, err
			}
		}
		if hold > 0 {
			time.Sleep(hold)
		}
		releasing := wire.Now()
		if err := c.release(ctx); err != nil {
			return nil, err
		}
		records = append(records, [4]int64{wanted, acquired, releasing, wire.Now()})
		if pause > 0 {
			time.Sleep(pause)
		}
	}
	return map[string]any{"rec": records, "errors": errs}, nil
}

// s7: `handles` goroutines of this process, each with its own lock on `key`
// (one client), loop acquire / increment a counter / release from `start`
// until `end`; one record [wanted, acquired, releasing, released] per
// acquisition, per goroutine.
func s7(req wire.Request) (any, error) {
	a, err := loopRequest(req)
	if err != nil {
		return nil, err
	}
	f := req.Fields()
	handles := f.Number("handles")
	if err := f.Err(); err != nil {
		return nil, err
	}
	contenders := make([]contender, handles)
	for i := range contenders {
		if contenders[i], err = newContender(a.name, a.key, 1); err != nil {
			return nil, err
		}
	}
	if err := warmUp(a.name, a.warm, 1); err != nil {
		return nil, err
	}
	wire.SleepUntil(a.start)
	var counter atomic.Uint64
	recs := make([][][4]int64, handles)
	errs := make([]error, handles)
	var wg sync.WaitGroup
	for i, c := range contenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			recs[i] = [][4]int64{}
			for {
				wanted := wire.Now()
				if wanted >= a.end {
					return
				}
				if _, err := c.acquire(ctx); err != nil {
					errs[i] = err
					return
				}
				acquired := wire.Now()
				// A load and a store, not one atomic add: two holders at
				// once could lose an increment.
				counter.Store(counter.Load() + 1)
				releasing := wire.Now()
				if err := c.release(ctx); err != nil {
					errs[i] = err
					return
				}
				recs[i] = append(recs[i], [4]int64{wanted, acquired, releasing, wire.Now()})
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return map[string]any{"recs": recs, "counter": counter.Load()}, nil
}

// idle: `permits` holders with a long lease, then `waiters` locks waiting on
// the same key, of the kinds in `waiter_kinds` in turn (the contender's own
// by default). Answers once they wait; the harness measures, then ends this
// process.
func idle(req wire.Request) (any, error) {
	f := req.Fields()
	name, key, waiters := f.Text("contender"), f.Text("key"), f.Number("waiters")
	if err := f.Err(); err != nil {
		return nil, err
	}
	permits := int(req.NumberOr("permits", 1))
	kinds := []string{name}
	if list, ok := req["waiter_kinds"].([]any); ok && len(list) > 0 {
		kinds = kinds[:0]
		for _, k := range list {
			if s, ok := k.(string); ok {
				kinds = append(kinds, s)
			}
		}
	}
	ctx := context.Background()
	for range permits {
		h, err := newContenderFor(name, key, permits, long)
		if err != nil {
			return nil, err
		}
		if ok, err := h.acquire(ctx); !ok || err != nil {
			return nil, fmt.Errorf("the holder could not acquire: %v", err)
		}
	}
	for i := range waiters {
		w, err := newContenderFor(kinds[int(i)%len(kinds)], key, permits, long)
		if err != nil {
			return nil, err
		}
		go func() {
			for {
				if ok, err := w.acquire(ctx); ok && err == nil {
					return
				}
			}
		}()
	}
	return map[string]any{"ready": true}, nil
}
