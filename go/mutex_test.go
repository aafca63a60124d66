package rlock_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rlock "github.com/redis-rlock/redis-rlock/go"
	"github.com/redis-rlock/redis-rlock/go/internal/redisserver"
)

// within bounds every test's waits: a deadline, never a bare sleep.
func within(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func connect(t *testing.T, s *redisserver.Server, opts ...rlock.ClientOption) *rlock.Client {
	t.Helper()
	c, err := rlock.Connect(within(t, 10*time.Second), s.URL(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestALockIsHeldUntilUnlockedAndEachHoldingGetsALargerFencingToken(t *testing.T) {
	s := redisserver.Start(t)
	c := connect(t, s)
	ctx := within(t, 10*time.Second)
	m := c.Mutex("product:1001")
	first, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Do("EXISTS", "rlock:{product:1001}"); got != ":1" {
		t.Fatalf("the lock's key: EXISTS says %q", got)
	}
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if got := s.Do("EXISTS", "rlock:{product:1001}"); got != ":0" {
		t.Fatalf("after Unlock, EXISTS says %q", got)
	}
	second, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Unlock(ctx)
	if second.FencingToken() <= first.FencingToken() {
		t.Fatalf("token %d after %d", second.FencingToken(), first.FencingToken())
	}
}

func TestTryLockOnAHeldLockIsErrNotObtainedNamingTheLock(t *testing.T) {
	s := redisserver.Start(t)
	c := connect(t, s)
	ctx := within(t, 10*time.Second)
	held, err := c.Mutex("job").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock(ctx)
	_, err = c.Mutex("job").TryLock(ctx)
	var e *rlock.Error
	if !errors.Is(err, rlock.ErrNotObtained) || !errors.As(err, &e) || e.Name != "job" {
		t.Fatalf("TryLock on a held lock: %v", err)
	}
}

func TestAWaiterIsHandedTheLockWhenItsHolderUnlocks(t *testing.T) {
	s := redisserver.Start(t)
	c := connect(t, s)
	ctx := within(t, 20*time.Second)
	held, err := c.Mutex("handoff").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		h, err := c.Mutex("handoff").Lock(ctx)
		if err == nil {
			err = h.Unlock(ctx)
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("the waiter returned while the lock was held: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}

func TestAWaitPastItsContextsDeadlineIsDeadlineExceededAndLeavesNoTrace(t *testing.T) {
	s := redisserver.Start(t)
	c := connect(t, s)
	ctx := within(t, 20*time.Second)
	held, err := c.Mutex("busy").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	started := time.Now()
	_, err = c.Mutex("busy", rlock.WithFair()).Lock(short)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a wait past its deadline: %v", err)
	}
	if waited := time.Since(started); waited < 300*time.Millisecond {
		t.Fatalf("gave up after %v of 300ms", waited)
	}
	// Nobody left in line: the holder's release frees the lock for anyone.
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	again, err := c.Mutex("busy").TryLock(ctx)
	if err != nil {
		t.Fatalf("after the holder let go, with the timed-out waiter gone: %v", err)
	}
	again.Unlock(ctx)
}

func TestAnUnrenewedLeaseThatEndsClosesLostAndUnlockSaysErrLost(t *testing.T) {
	s := redisserver.Start(t)
	c := connect(t, s)
	ctx := within(t, 20*time.Second)
	held, err := c.Mutex("lease", rlock.WithTTL(500*time.Millisecond), rlock.WithoutAutoRenew()).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	scope, cancel := held.Context(ctx)
	defer cancel()
	select {
	case <-held.Lost():
	case <-ctx.Done():
		t.Fatal("Lost was never closed")
	}
	<-scope.Done()
	if !errors.Is(context.Cause(scope), rlock.ErrLost) {
		t.Fatalf("the holding's context ended with %v", context.Cause(scope))
	}
	if err := held.Unlock(ctx); !errors.Is(err, rlock.ErrLost) {
		t.Fatalf("Unlock after the lease ended: %v", err)
	}
}

func TestErrIsNilWhileTheLeaseRunsAndErrLostOnceItEnded(t *testing.T) {
	s := redisserver.Start(t)
	c := connect(t, s)
	ctx := within(t, 20*time.Second)
	held, err := c.Mutex("checked", rlock.WithTTL(2*time.Second), rlock.WithoutAutoRenew()).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := held.Err(); err != nil {
		t.Fatalf("just acquired: %v", err)
	}
	for held.Err() == nil {
		if ctx.Err() != nil {
			t.Fatal("Err still nil past the lease")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := held.Err(); !errors.Is(err, rlock.ErrLost) {
		t.Fatalf("past the lease: %v", err)
	}
	select {
	case <-held.Lost():
	case <-ctx.Done():
		t.Fatal("Err said lost, and Lost was never closed")
	}
	if err := held.Err(); !errors.Is(err, rlock.ErrLost) {
		t.Fatalf("once Lost is closed: %v", err)
	}
	held.Unlock(ctx)
	if err := held.Err(); !errors.Is(err, rlock.ErrLost) {
		t.Fatalf("a lost holding after Unlock: %v", err)
	}
	// Another holding of the same Mutex value is not this one.
	m := c.Mutex("again")
	first, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	second, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Unlock(ctx)
	if err := first.Err(); !errors.Is(err, rlock.ErrNotOwner) {
		t.Fatalf("an unlocked holding, while the next one runs: %v", err)
	}
	if err := second.Err(); err != nil {
		t.Fatalf("the running holding: %v", err)
	}
}

func TestBadOptionsAreErrInvalidNamingTheOptionAsThisPackageSpellsIt(t *testing.T) {
	s := redisserver.Start(t)
	c := connect(t, s)
	ctx := within(t, 10*time.Second)
	_, err := c.Mutex("x", rlock.WithTTL(-time.Second)).Lock(ctx)
	var e *rlock.Error
	if !errors.Is(err, rlock.ErrInvalid) || !errors.As(err, &e) || e.Option != "WithTTL" {
		t.Fatalf("a negative TTL: %v", err)
	}
	if _, err := c.Mutex("").TryLock(ctx); !errors.Is(err, rlock.ErrInvalid) {
		t.Fatalf("an empty name: %v", err)
	}
	if got := s.Do("EXISTS", "rlock:{x}"); got != ":0" {
		t.Fatalf("bad input wrote the lock: EXISTS %s", got)
	}
}

func TestOneMutexValueIsOneOwnerAndLockingItAgainNests(t *testing.T) {
	s := redisserver.Start(t)
	c := connect(t, s)
	ctx := within(t, 10*time.Second)
	m := c.Mutex("nested")
	outer, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := m.TryLock(ctx)
	if err != nil || inner.FencingToken() != outer.FencingToken() {
		t.Fatalf("re-entry: %v, token %d of %d", err, inner.FencingToken(), outer.FencingToken())
	}
	inner.Unlock(ctx)
	if _, err := c.Mutex("nested").TryLock(ctx); !errors.Is(err, rlock.ErrNotObtained) {
		t.Fatalf("after the inner Unlock the outer holding must stand: %v", err)
	}
	outer.Unlock(ctx)
}

func TestClosingTheClientClosesLostOfEveryHolding(t *testing.T) {
	s := redisserver.Start(t)
	c := connect(t, s)
	ctx := within(t, 10*time.Second)
	held, err := c.Mutex("closing").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	select {
	case <-held.Lost():
	case <-ctx.Done():
		t.Fatal("Lost stayed open after Close")
	}
	if _, err := c.Mutex("closing").TryLock(ctx); !errors.Is(err, rlock.ErrClosed) {
		t.Fatalf("a lock of a closed client: %v", err)
	}
}

// Many goroutines, each its own owner, contend on one lock: never two
// inside at once, every one gets its turn, and waiting holds no OS thread.
func TestGoroutinesWaitingOnOneLockNeverOverlapAndHoldNoThread(t *testing.T) {
	s := redisserver.Start(t)
	c := connect(t, s)
	ctx := within(t, 60*time.Second)
	waiters := 10000
	if raceEnabled {
		waiters = 2000
	}
	holder, err := c.Mutex("crowd").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	threadsBefore := pprof.Lookup("threadcreate").Count()
	var inside, overlaps, done atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < waiters; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, err := c.Mutex("crowd").Lock(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			if inside.Add(1) != 1 {
				overlaps.Add(1)
			}
			inside.Add(-1)
			if err := h.Unlock(ctx); err != nil {
				t.Error(err)
			}
			done.Add(1)
		}()
	}
	// Every waiter is waiting once the line holds them all (each joins it
	// after its first 10 ms).
	for ctx.Err() == nil && s.Do("LLEN", "rlock:{crowd}:queue") != fmt.Sprintf(":%d", waiters) {
		time.Sleep(20 * time.Millisecond)
	}
	// Waiting, each is parked on a channel, none inside a call into the
	// core (which would hold its OS thread), and the threads made while
	// they called in are a handful (calls into the core are bounded to
	// the Ps that run them). The last to join the line may still be
	// returning from the call that joined it (a call drives its request
	// while it awaits the reply): none is in a call for long.
	inC := inCalls()
	for settled := time.Now().Add(5 * time.Second); time.Now().Before(settled) && inC > 0; {
		time.Sleep(20 * time.Millisecond)
		inC = inCalls()
	}
	grown := pprof.Lookup("threadcreate").Count() - threadsBefore
	t.Logf("%d goroutines waiting: %d in a C call, %d OS threads made", waiters, inC, grown)
	if inC > 0 || grown > 10 {
		t.Fatalf("%d waiting goroutines: %d in a C call, %d OS threads made", waiters, inC, grown)
	}
	started := time.Now()
	holder.Unlock(ctx)
	wg.Wait()
	t.Logf("%d handoffs in %v", waiters, time.Since(started))
	if overlaps.Load() != 0 || done.Load() != int32(waiters) {
		t.Fatalf("%d overlaps, %d of %d got their turn", overlaps.Load(), done.Load(), waiters)
	}
}

// inCalls counts the goroutines inside a call into the core.
func inCalls() int {
	var stacks strings.Builder
	_ = pprof.Lookup("goroutine").WriteTo(&stacks, 2)
	n := 0
	for _, g := range strings.Split(stacks.String(), "\n\n") {
		if strings.Contains(g, "_Cfunc_rlock") {
			n++
		}
	}
	return n
}

// Goroutines sharing one Mutex share its holding, whichever of them wakes
// first: every re-entry carries the fresh holding's token and hears of its
// loss, with the CPUs kept busy so that they wake in any order.
func TestGoroutinesSharingAMutexShareItsHoldingTokenAndLoss(t *testing.T) {
	s := redisserver.Start(t)
	c := connect(t, s)
	ctx := within(t, 120*time.Second)
	stop := make(chan struct{})
	defer close(stop)
	for b := 0; b < 4*runtime.GOMAXPROCS(0); b++ {
		go func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
			}
		}()
	}
	const sharers = 8
	for i := 0; i < 10; i++ {
		m := c.Mutex(fmt.Sprintf("shared:%d", i), rlock.WithTTL(300*time.Millisecond), rlock.WithoutAutoRenew())
		before, err := m.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		before.Unlock(ctx)
		helds := make([]*rlock.Held, sharers)
		var wg sync.WaitGroup
		for g := range helds {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				var err error
				if helds[g], err = m.Lock(ctx); err != nil {
					t.Error(err)
				}
			}(g)
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		for g, h := range helds {
			if h.FencingToken() != helds[0].FencingToken() || h.FencingToken() <= before.FencingToken() {
				t.Fatalf("round %d: sharer %d has token %d, sharer 0 %d, the holding before %d",
					i, g, h.FencingToken(), helds[0].FencingToken(), before.FencingToken())
			}
		}
		for g, h := range helds {
			select {
			case <-h.Lost():
			case <-ctx.Done():
				t.Fatalf("round %d: sharer %d was never told its unrenewed 300 ms lease ended", i, g)
			}
		}
	}
}

func TestANilContextAndASecondUnlockAreTypedErrorsNotPanics(t *testing.T) {
	s := redisserver.Start(t)
	c := connect(t, s)
	ctx := within(t, 10*time.Second)
	var none context.Context
	if _, err := c.Mutex("x").Lock(none); !errors.Is(err, rlock.ErrInvalid) {
		t.Fatalf("Lock(nil): %v", err)
	}
	if _, err := c.Cached(none, "k", nil, rlock.WithTTL(time.Second)); !errors.Is(err, rlock.ErrInvalid) {
		t.Fatalf("Cached(nil): %v", err)
	}
	held, err := c.Mutex("x").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := held.Unlock(ctx); !errors.Is(err, rlock.ErrNotOwner) {
		t.Fatalf("a second Unlock: %v", err)
	}
}

func TestFairWaitersAreHandedTheLockInTheOrderTheyCame(t *testing.T) {
	s := redisserver.Start(t)
	c := connect(t, s)
	ctx := within(t, 30*time.Second)
	held, err := c.Mutex("fair", rlock.WithFair()).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := 0; i < 5; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			h, err := c.Mutex("fair", rlock.WithFair()).Lock(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			h.Unlock(ctx)
		}(i)
		// The next waiter comes once this one stands in line.
		for n, _ := s.Value("LLEN", "rlock:{fair}:queue"); n != fmt.Sprint(i+1); n, _ = s.Value("LLEN", "rlock:{fair}:queue") {
			if ctx.Err() != nil {
				t.Fatalf("waiter %d never stood in line (%s in line)", i, n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if fmt.Sprint(order) != "[0 1 2 3 4]" {
		t.Fatalf("served in the order %v", order)
	}
}
