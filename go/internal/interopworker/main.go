// Command interopworker is the Go side of tests/interop: a line-driven lock
// worker speaking the protocol of core/examples/interop_worker.rs (and
// tests/interop/worker.py, which documents it), connected to $REDIS_URL.
//
// Acquiring one lock of a name twice nests: the worker keeps one handle per
// lock and name (both sides of a read-write lock through one RWMutex), and
// a release gives back the latest acquisition of that lock. Like the Rust
// worker, it reads and writes cache values as bytes.
package main

import (
	"bufio"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	rlock "github.com/redis-rlock/redis-rlock/go"
	"github.com/redis-rlock/redis-rlock/go/internal/redisserver"
)

type worker struct {
	client *rlock.Client
	data   *redisserver.Server
	locks  map[string]acquirer
	helds  map[string][]*rlock.Held
}

// acquirer takes one lock of a name, waiting or once.
type acquirer func(ctx context.Context, once bool) (*rlock.Held, error)

func main() {
	ctx := context.Background()
	url := os.Getenv("REDIS_URL")
	client, err := rlock.Connect(ctx, url)
	if err != nil {
		fmt.Println("err", err)
		os.Exit(1)
	}
	defer client.Close()
	data, err := redisserver.At(url)
	if err != nil {
		fmt.Println("err", err)
		os.Exit(1)
	}
	w := &worker{client: client, data: data, locks: map[string]acquirer{}, helds: map[string][]*rlock.Held{}}
	input := bufio.NewScanner(os.Stdin)
	for input.Scan() {
		words := strings.Fields(input.Text())
		if len(words) > 0 && words[0] == "cached" {
			fmt.Println("ready")
			if !input.Scan() || input.Text() != "go" {
				fmt.Println("err expected go")
				continue
			}
		}
		fmt.Println(w.do(ctx, words))
	}
}

func (w *worker) do(ctx context.Context, words []string) string {
	switch {
	case len(words) == 5 && words[0] == "acquire":
		which, name := words[1], words[2]
		ttl, err1 := strconv.Atoi(words[3])
		wait, err2 := strconv.Atoi(words[4])
		if err := errors.Join(err1, err2); err != nil {
			return "err " + err.Error()
		}
		acquire := w.handle(which, name, time.Duration(ttl)*time.Millisecond)
		waitCtx, cancel := ctx, context.CancelFunc(func() {})
		if wait > 0 {
			waitCtx, cancel = context.WithTimeout(ctx, time.Duration(wait)*time.Millisecond)
		}
		defer cancel()
		held, err := acquire(waitCtx, wait == 0)
		switch {
		case err == nil:
			key := which + " " + name
			w.helds[key] = append(w.helds[key], held)
			return fmt.Sprintf("ok %d", held.FencingToken())
		case errors.Is(err, rlock.ErrNotObtained), errors.Is(err, context.DeadlineExceeded):
			return "busy"
		case errors.Is(err, rlock.ErrUpgrade):
			return "upgrade"
		case errors.Is(err, rlock.ErrInvalid):
			return "invalid " + err.Error()
		}
		return "err " + err.Error()
	case len(words) == 3 && words[0] == "release":
		key := words[1] + " " + words[2]
		helds := w.helds[key]
		if len(helds) == 0 {
			return "err never acquired here"
		}
		w.helds[key] = helds[:len(helds)-1]
		if err := helds[len(helds)-1].Unlock(ctx); err != nil {
			return "err " + err.Error()
		}
		return "ok"
	case len(words) == 5 && words[0] == "count":
		return w.count(ctx, words[1], words[2], words[3], words[4])
	case len(words) == 5 && words[0] == "cached":
		return w.cached(ctx, words[1], words[2], words[3], words[4])
	case len(words) == 2 && words[0] == "invalidate":
		had, err := w.client.Invalidate(ctx, words[1])
		if err != nil {
			return "err " + err.Error()
		}
		return fmt.Sprintf("ok %t", had)
	}
	return fmt.Sprintf("err unknown command %q", strings.Join(words, " "))
}

// handle is this worker's lock of which on name, made on first use.
func (w *worker) handle(which, name string, ttl time.Duration) acquirer {
	key := which + " " + name
	if a, ok := w.locks[key]; ok {
		return a
	}
	opts := rlock.WithTTL(ttl)
	switch {
	case which == "mutex":
		m := w.client.Mutex(name, opts)
		w.locks[key] = func(ctx context.Context, once bool) (*rlock.Held, error) {
			if once {
				return m.TryLock(ctx)
			}
			return m.Lock(ctx)
		}
	case which == "read" || which == "write":
		rw := w.client.RWMutex(name, opts)
		w.locks["read "+name] = func(ctx context.Context, once bool) (*rlock.Held, error) {
			if once {
				return rw.TryRLock(ctx)
			}
			return rw.RLock(ctx)
		}
		w.locks["write "+name] = func(ctx context.Context, once bool) (*rlock.Held, error) {
			if once {
				return rw.TryLock(ctx)
			}
			return rw.Lock(ctx)
		}
	default:
		permits, _ := strconv.Atoi(strings.TrimPrefix(which, "semaphore:"))
		s := w.client.Semaphore(name, permits, opts)
		w.locks[key] = func(ctx context.Context, once bool) (*rlock.Held, error) {
			if once {
				return s.TryAcquire(ctx)
			}
			return s.Acquire(ctx)
		}
	}
	return w.locks[key]
}

// count runs parallel goroutines, each its own owner, each n times taking
// the mutex name and incrementing key with a GET then a SET.
func (w *worker) count(ctx context.Context, name, key, nText, parallelText string) string {
	n, err1 := strconv.Atoi(nText)
	parallel, err2 := strconv.Atoi(parallelText)
	if err := errors.Join(err1, err2); err != nil {
		return "err " + err.Error()
	}
	seen := make([][]string, parallel)
	errs := make([]error, parallel)
	var wg sync.WaitGroup
	for p := 0; p < parallel; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			m := w.client.Mutex(name)
			for i := 0; i < n; i++ {
				waitCtx, cancel := context.WithTimeout(ctx, time.Minute)
				held, err := m.Lock(waitCtx)
				cancel()
				if err != nil {
					errs[p] = err
					return
				}
				text, _ := w.data.Value("GET", key)
				value, _ := strconv.Atoi(text)
				w.data.Value("SET", key, strconv.Itoa(value+1))
				seen[p] = append(seen[p], fmt.Sprintf("%d:%d", value, held.FencingToken()))
				if err := held.Unlock(ctx); err != nil {
					errs[p] = err
					return
				}
			}
		}(p)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return "err " + err.Error()
	}
	var all []string
	for _, s := range seen {
		all = append(all, s...)
	}
	return "ok " + strings.Join(all, " ")
}

// cached reads the entry key once: its loader INCRs counter, waits for an
// item on the list gate (unless "-"), then gives what spec says
// (bytes:HEX, text:HEX or json:HEX as those bytes, none, fail:HEX).
func (w *worker) cached(ctx context.Context, key, counter, gate, spec string) string {
	kind, arg, _ := strings.Cut(spec, ":")
	raw, err := hex.DecodeString(arg)
	if err != nil {
		return "err " + err.Error()
	}
	ran := false
	loader := func(context.Context) ([]byte, error) {
		ran = true
		w.data.Value("INCR", counter)
		if gate != "-" {
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
				if _, popped := w.data.Value("LPOP", gate); popped {
					break
				}
				if time.Now().After(deadline) {
					return nil, fmt.Errorf("nobody pushed to %s within 20 s", gate)
				}
			}
		}
		switch kind {
		case "fail":
			return nil, errors.New(string(raw))
		case "none":
			return nil, nil
		}
		return raw, nil
	}
	value, err := w.client.Cached(ctx, key, loader, rlock.WithTTL(time.Minute))
	got := "got"
	if ran {
		got = "loaded"
	}
	switch {
	case err == nil && value == nil:
		return got + " none"
	case err == nil:
		return fmt.Sprintf("%s bytes %x", got, value)
	case ran:
		return "failed " + err.Error()
	case errors.Is(err, rlock.ErrLoader):
		var e *rlock.Error
		errors.As(err, &e)
		return fmt.Sprintf("loader-failed %s %s", key, e.Error())
	}
	return "err " + err.Error()
}
