package rlock_test

import (
	"errors"
	"testing"
	"time"

	rlock "github.com/redis-rlock/redis-rlock/go"
	"github.com/redis-rlock/redis-rlock/go/internal/redisserver"
)

// A Redlock over three independent masters: a lock is held on a majority,
// and a cache entry, which would live on each master apart, is refused.
func TestARedlockHoldsTheLockOnAMajorityOfMasters(t *testing.T) {
	masters := []*redisserver.Server{redisserver.Start(t), redisserver.Start(t), redisserver.Start(t)}
	c := connect(t, masters[0], rlock.WithURLs(masters[1].URL(), masters[2].URL()))
	ctx := within(t, 20*time.Second)
	held, err := c.Mutex("ledger").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	on := 0
	for _, m := range masters {
		if m.Do("EXISTS", "rlock:{ledger}") == ":1" {
			on++
		}
	}
	if on < 2 {
		t.Fatalf("held on %d of 3 masters", on)
	}
	if _, err := c.Mutex("ledger").TryLock(ctx); !errors.Is(err, rlock.ErrNotObtained) {
		t.Fatalf("a second owner on a Redlock: %v", err)
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for i, m := range masters {
		if m.Do("EXISTS", "rlock:{ledger}") != ":0" {
			t.Fatalf("master %d still holds the lock after Unlock", i)
		}
	}
	if _, err := c.Cached(ctx, "k", nil, rlock.WithTTL(time.Minute)); !errors.Is(err, rlock.ErrInvalid) {
		t.Fatalf("a cache entry on a Redlock: %v", err)
	}
}

// Through a Sentinel: the client finds the master it names and locks there.
func TestAClientOfASentinelURLLocksOnTheMasterItNames(t *testing.T) {
	master := redisserver.Start(t)
	sentinel := redisserver.StartSentinel(t, master)
	c := connect(t, sentinel)
	ctx := within(t, 20*time.Second)
	held, err := c.Mutex("sentinelled").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := master.Do("EXISTS", "rlock:{sentinelled}"); got != ":1" {
		t.Fatalf("the master's lock key: EXISTS %s", got)
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// On a Redis Cluster: names in other slots are locked where their slot lives.
func TestAClusterClientLocksEachNameOnTheNodeOfItsSlot(t *testing.T) {
	nodes := redisserver.StartCluster(t)
	c := connect(t, nodes[0], rlock.WithCluster(), rlock.WithURLs(nodes[1].URL(), nodes[2].URL()))
	ctx := within(t, 30*time.Second)
	var helds []*rlock.Held
	for _, name := range []string{"a", "b", "c", "d", "e", "f"} {
		h, err := c.Mutex(name).Lock(ctx)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := c.Mutex(name).TryLock(ctx); !errors.Is(err, rlock.ErrNotObtained) {
			t.Fatalf("a second owner of %s: %v", name, err)
		}
		helds = append(helds, h)
	}
	held := 0
	for _, n := range nodes {
		if n.Do("DBSIZE") != ":0" {
			held++
		}
	}
	if held < 2 {
		t.Fatalf("six names locked on %d node(s) of 3", held)
	}
	for _, h := range helds {
		if err := h.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
