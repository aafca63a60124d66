package rlock_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rlock "github.com/redis-rlock/redis-rlock/go"
	"github.com/redis-rlock/redis-rlock/go/internal/redisserver"
)

func TestOneLoaderRunsForEveryCallerOfAMissAcrossClients(t *testing.T) {
	s := redisserver.Start(t)
	clients := []*rlock.Client{connect(t, s), connect(t, s)}
	ctx := within(t, 20*time.Second)
	var loads atomic.Int32
	release := make(chan struct{})
	loader := func(context.Context) ([]byte, error) {
		loads.Add(1)
		<-release // every other caller asks meanwhile
		return []byte("price 12"), nil
	}
	const callers = 20
	var wg sync.WaitGroup
	values := make([][]byte, callers)
	errs := make([]error, callers)
	for i := 0; i < callers; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			values[i], errs[i] = clients[i%2].Cached(ctx, "product:1001", loader, rlock.WithTTL(time.Minute))
		}(i)
	}
	// The rebuild lock is taken once a loader runs.
	for ctx.Err() == nil && loads.Load() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	close(release)
	wg.Wait()
	for i := range values {
		if errs[i] != nil || string(values[i]) != "price 12" {
			t.Fatalf("caller %d: %q, %v", i, values[i], errs[i])
		}
	}
	if n := loads.Load(); n != 1 {
		t.Fatalf("%d loader calls for one miss", n)
	}
}

func TestALoadersFailureReachesItsCallerAndThoseWaitingAsErrLoader(t *testing.T) {
	s := redisserver.Start(t)
	c := connect(t, s)
	ctx := within(t, 20*time.Second)
	broken := errors.New("the database is down")
	started := make(chan struct{})
	release := make(chan struct{})
	failing := func(context.Context) ([]byte, error) {
		close(started)
		<-release
		return nil, broken
	}
	first := make(chan error, 1)
	go func() {
		_, err := c.Cached(ctx, "report", failing, rlock.WithTTL(time.Minute))
		first <- err
	}()
	<-started
	waiter := make(chan error, 1)
	go func() {
		_, err := c.Cached(ctx, "report", func(context.Context) ([]byte, error) {
			return nil, errors.New("a waiter's loader must not run")
		}, rlock.WithTTL(time.Minute))
		waiter <- err
	}()
	// The waiter waits once it listens for the rebuild's news.
	for ctx.Err() == nil && s.Subscribers("rlock:{report}:cached:news") < 1 {
		time.Sleep(5 * time.Millisecond)
	}
	close(release)
	if err := <-first; !errors.Is(err, broken) {
		t.Fatalf("the loader's caller got %v", err)
	}
	if err := <-waiter; !errors.Is(err, rlock.ErrLoader) {
		t.Fatalf("the waiter got %v", err)
	}
}

func TestNothingFoundIsKeptForItsTTLAndInvalidateMakesTheNextReadLoad(t *testing.T) {
	s := redisserver.Start(t)
	c := connect(t, s)
	ctx := within(t, 20*time.Second)
	var loads atomic.Int32
	nothing := func(context.Context) ([]byte, error) { loads.Add(1); return nil, nil }
	for i := 0; i < 2; i++ {
		v, err := c.Cached(ctx, "user:7", nothing, rlock.WithTTL(time.Minute), rlock.WithNoneTTL(time.Minute))
		if err != nil || v != nil {
			t.Fatalf("read %d: %q, %v", i, v, err)
		}
	}
	if loads.Load() != 1 {
		t.Fatalf("%d loads for a kept nothing-found", loads.Load())
	}
	if had, err := c.Invalidate(ctx, "user:7"); err != nil || !had {
		t.Fatalf("Invalidate: %v, %v", had, err)
	}
	if had, err := c.Invalidate(ctx, "user:7"); err != nil || had {
		t.Fatalf("Invalidate again: %v, %v", had, err)
	}
	if _, err := c.Cached(ctx, "user:7", nothing, rlock.WithTTL(time.Minute)); err != nil || loads.Load() != 2 {
		t.Fatalf("after Invalidate: %v, %d loads", err, loads.Load())
	}
}

func TestAnOptionOfTheOtherKindOrAMissingTTLIsErrInvalidNamingIt(t *testing.T) {
	s := redisserver.Start(t)
	c := connect(t, s)
	ctx := within(t, 10*time.Second)
	never := func(context.Context) ([]byte, error) { return nil, errors.New("must not run") }
	var e *rlock.Error
	if _, err := c.Cached(ctx, "k", never); !errors.As(err, &e) || !errors.Is(err, rlock.ErrInvalid) || e.Option != "WithTTL" {
		t.Fatalf("Cached without WithTTL: %v", err)
	}
	if _, err := c.Cached(ctx, "k", never, rlock.WithTTL(time.Minute), rlock.WithFair()); !errors.As(err, &e) || e.Option != "WithFair" {
		t.Fatalf("Cached WithFair: %v", err)
	}
	if _, err := c.Mutex("m", rlock.WithStale(time.Second)).TryLock(ctx); !errors.As(err, &e) || e.Option != "WithStale" {
		t.Fatalf("a Mutex WithStale: %v", err)
	}
}

// A refresh runs after Cached returned the stale value: a loader that
// panics there is given up (not a crash), and a later read refreshes again.
func TestARefreshWhoseLoaderPanicsIsGivenUpAndALaterReadRefreshes(t *testing.T) {
	s := redisserver.Start(t)
	c := connect(t, s)
	ctx := within(t, 30*time.Second)
	opts := []rlock.Option{rlock.WithTTL(100 * time.Millisecond), rlock.WithStale(time.Minute), rlock.WithJitter(0)}
	value := func(v string) func(context.Context) ([]byte, error) {
		return func(context.Context) ([]byte, error) { return []byte(v), nil }
	}
	if v, err := c.Cached(ctx, "k", value("v1"), opts...); err != nil || string(v) != "v1" {
		t.Fatalf("first read: %q, %v", v, err)
	}
	var panicked atomic.Int32
	broken := func(context.Context) ([]byte, error) {
		panicked.Add(1)
		panic("a loader bug")
	}
	for ctx.Err() == nil && panicked.Load() == 0 {
		if v, err := c.Cached(ctx, "k", broken, opts...); err != nil || string(v) != "v1" {
			t.Fatalf("a read while fresh or stale: %q, %v", v, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for ctx.Err() == nil {
		v, err := c.Cached(ctx, "k", value("v2"), opts...)
		if err != nil {
			t.Fatal(err)
		}
		if string(v) == "v2" {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no refresh ran after the one whose loader panicked")
}

// The value a caller's loader gave is stored though nothing else refers to
// its client meanwhile: the client is not collected (and closed) mid-call.
func TestAClientOnlyItsCachedCallRefersToStaysOpenUntilTheValueIsStored(t *testing.T) {
	s := redisserver.Start(t)
	ctx := within(t, 20*time.Second)
	collecting := func(context.Context) ([]byte, error) {
		runtime.GC()
		runtime.GC()
		return []byte("reloaded"), nil
	}
	read := func() ([]byte, error) {
		c, err := rlock.Connect(ctx, s.URL())
		if err != nil {
			return nil, err
		}
		return c.Cached(ctx, "forgotten", collecting, rlock.WithTTL(time.Minute))
	}
	if v, err := read(); err != nil || string(v) != "reloaded" {
		t.Fatalf("%q, %v", v, err)
	}
	other := connect(t, s)
	v, err := other.Cached(ctx, "forgotten", func(context.Context) ([]byte, error) { return []byte("loaded again"), nil },
		rlock.WithTTL(time.Minute))
	if err != nil || string(v) != "reloaded" {
		t.Fatalf("the value was not stored: %q, %v", v, err)
	}
}
