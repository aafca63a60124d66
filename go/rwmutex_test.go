package rlock_test

import (
	"errors"
	"testing"
	"time"

	rlock "github.com/redis-rlock/redis-rlock/go"
	"github.com/redis-rlock/redis-rlock/go/internal/redisserver"
)

func TestReadersShareTheLockAndAWriterWaitsForThemAll(t *testing.T) {
	s := redisserver.Start(t)
	c := connect(t, s)
	ctx := within(t, 10*time.Second)
	r1, err := c.RWMutex("doc").RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := c.RWMutex("doc").TryRLock(ctx)
	if err != nil {
		t.Fatalf("a second reader: %v", err)
	}
	writer := c.RWMutex("doc")
	if _, err := writer.TryLock(ctx); !errors.Is(err, rlock.ErrNotObtained) {
		t.Fatalf("a writer beside readers: %v", err)
	}
	r1.Unlock(ctx)
	if _, err := writer.TryLock(ctx); !errors.Is(err, rlock.ErrNotObtained) {
		t.Fatalf("a writer beside one reader: %v", err)
	}
	r2.Unlock(ctx)
	w, err := writer.TryLock(ctx)
	if err != nil {
		t.Fatalf("a writer once the readers left: %v", err)
	}
	if _, err := c.RWMutex("doc").TryRLock(ctx); !errors.Is(err, rlock.ErrNotObtained) {
		t.Fatalf("a reader beside a writer: %v", err)
	}
	if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestAnOwnerThatReadsCannotUpgradeButAWriterMayDowngrade(t *testing.T) {
	s := redisserver.Start(t)
	c := connect(t, s)
	ctx := within(t, 10*time.Second)
	reader := c.RWMutex("upgrade")
	r, err := reader.RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reader.Lock(ctx); !errors.Is(err, rlock.ErrUpgrade) {
		t.Fatalf("write asked while holding the read: %v", err)
	}
	r.Unlock(ctx)

	rw := c.RWMutex("downgrade")
	w, err := rw.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r, err = rw.RLock(ctx)
	if err != nil {
		t.Fatalf("read inside the owner's write: %v", err)
	}
	w.Unlock(ctx)
	if _, err := c.RWMutex("downgrade").TryLock(ctx); !errors.Is(err, rlock.ErrNotObtained) {
		t.Fatalf("a writer got in after a downgrade: %v", err)
	}
	if _, err := c.RWMutex("downgrade").TryRLock(ctx); err != nil {
		t.Fatalf("another reader beside the downgraded owner: %v", err)
	}
	r.Unlock(ctx)
}

func TestASemaphoreAdmitsItsPermitsAndRefusesAnotherSize(t *testing.T) {
	s := redisserver.Start(t)
	c := connect(t, s)
	ctx := within(t, 10*time.Second)
	a, err := c.Semaphore("pool", 2).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Semaphore("pool", 2).TryAcquire(ctx)
	if err != nil {
		t.Fatalf("the second of 2 permits: %v", err)
	}
	if a.FencingToken() == b.FencingToken() {
		t.Fatalf("two permit holders with token %d", a.FencingToken())
	}
	if _, err := c.Semaphore("pool", 2).TryAcquire(ctx); !errors.Is(err, rlock.ErrNotObtained) {
		t.Fatalf("a third of 2 permits: %v", err)
	}
	if _, err := c.Semaphore("pool", 3).TryAcquire(ctx); !errors.Is(err, rlock.ErrInvalid) {
		t.Fatalf("3 permits asked while holders count 2: %v", err)
	}
	var e *rlock.Error
	if _, err := c.Semaphore("pool", 0).TryAcquire(ctx); !errors.As(err, &e) || e.Option != "permits" {
		t.Fatalf("a semaphore of 0 permits: %v", err)
	}
	a.Unlock(ctx)
	b.Unlock(ctx)
}

func TestOneSemaphoreValueTakesSeveralPermitsAtOnceAsOneOwner(t *testing.T) {
	s := redisserver.Start(t)
	c := connect(t, s)
	ctx := within(t, 10*time.Second)
	pool := c.Semaphore("batch", 3)
	three, err := pool.AcquireN(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Semaphore("batch", 3).TryAcquire(ctx); !errors.Is(err, rlock.ErrNotObtained) {
		t.Fatalf("a permit of a full semaphore: %v", err)
	}
	var e *rlock.Error
	if _, err := pool.TryAcquireN(ctx, 4); !errors.As(err, &e) || e.Option != "permits" {
		t.Fatalf("4 permits of 3: %v", err)
	}
	if err := three.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	two, err := pool.TryAcquireN(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Semaphore("batch", 3).TryAcquireN(ctx, 2); !errors.Is(err, rlock.ErrNotObtained) {
		t.Fatalf("2 permits beside 2 of 3: %v", err)
	}
	two.Unlock(ctx)
}

func TestExtendResetsAnUnrenewedLease(t *testing.T) {
	s := redisserver.Start(t)
	c := connect(t, s)
	ctx := within(t, 10*time.Second)
	held, err := c.Mutex("extended", rlock.WithTTL(time.Second), rlock.WithoutAutoRenew()).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := held.Extend(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if pttl, _ := s.Value("PTTL", "rlock:{extended}"); len(pttl) < 5 {
		t.Fatalf("the lease after Extend(1 minute): PTTL %s ms", pttl)
	}
	if err := held.Extend(ctx, -time.Second); !errors.Is(err, rlock.ErrInvalid) {
		t.Fatalf("a negative extension: %v", err)
	}
	held.Unlock(ctx)
	if err := held.Extend(ctx, time.Minute); !errors.Is(err, rlock.ErrNotOwner) {
		t.Fatalf("Extend after Unlock: %v", err)
	}
}
