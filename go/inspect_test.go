package rlock_test

import (
	"os"
	"strings"
	"testing"
	"time"

	rlock "github.com/redis-rlock/redis-rlock/go"
	"github.com/redis-rlock/redis-rlock/go/internal/redisserver"
)

func TestInspectNamesTheHolderAndTheWaiterInLineAndStatsCountThem(t *testing.T) {
	s := redisserver.Start(t)
	c := connect(t, s)
	ctx := within(t, 20*time.Second)
	held, err := c.Mutex("audited").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() {
		h, err := c.Mutex("audited", rlock.WithFair()).Lock(ctx)
		if err == nil {
			err = h.Unlock(ctx)
		}
		waited <- err
	}()
	var seen *rlock.Inspection
	for ctx.Err() == nil {
		if seen, err = c.Inspect(ctx, "audited"); err != nil {
			t.Fatal(err)
		}
		if seen.Waiting == 1 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !seen.Held || seen.Fence != held.FencingToken() || seen.Holder == nil || len(seen.Waiters) != 1 {
		t.Fatalf("inspection: %+v", seen)
	}
	who := seen.Holder.Client
	if who == nil || !strings.HasPrefix(who.Face, "go") || who.PID != os.Getpid() || seen.TTL <= 0 {
		t.Fatalf("the holder's client: %+v (ttl %v)", who, seen.TTL)
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	stats := c.Stats()
	if stats.Acquisitions != 2 || stats.ContendedAcquisitions != 1 || stats.Releases != 2 || stats.Wait.Count != 2 {
		t.Fatalf("stats: %+v", stats)
	}
}
