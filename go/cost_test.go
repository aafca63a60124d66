package rlock_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	rlock "github.com/redis-rlock/redis-rlock/go"
	"github.com/redis-rlock/redis-rlock/go/internal/redisserver"
)

// calls is how many commands the server ran, by name (INFO commandstats),
// the INFO that reads them left out.
func calls(t testing.TB, s *redisserver.Server) map[string]int {
	stats, ok := s.Value("INFO", "commandstats")
	if !ok {
		t.Fatal("INFO commandstats: no answer")
	}
	out := map[string]int{}
	for _, line := range strings.Split(stats, "\n") {
		name, rest, found := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":calls=")
		if !found || name == "info" {
			continue
		}
		n, _ := strconv.Atoi(strings.SplitN(rest, ",", 2)[0])
		out[name] = n
	}
	return out
}

func TestAnUncontendedCycleCostsTwoScriptCallsAndTheCommandsOfEveryFace(t *testing.T) {
	s := redisserver.Start(t)
	c := connect(t, s)
	ctx := within(t, 20*time.Second)
	m := c.Mutex("cost")
	cycle := func() {
		h, err := m.TryLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	cycle() // the scripts loaded, the client registered
	before := calls(t, s)
	for i := 0; i < 50; i++ {
		cycle()
	}
	after := calls(t, s)
	total := 0
	for name, n := range after {
		total += n - before[name]
	}
	// Two round trips: the acquire and release scripts; inside them the
	// commands the Rust core's own test counts (core/tests/protocol.rs).
	if got := after["evalsha"] - before["evalsha"]; got != 100 || total != 50*11 {
		t.Fatalf("50 cycles ran %d EVALSHA and %d commands in all: %v", got, total, after)
	}
}

// BenchmarkUncontendedLockUnlock is one cycle from Go: the two round trips
// and the crossings into the core and back.
func BenchmarkUncontendedLockUnlock(b *testing.B) {
	s := redisserver.Start(b)
	ctx := context.Background()
	c, err := rlock.Connect(ctx, s.URL())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	m := c.Mutex("bench")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		h, err := m.TryLock(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := h.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
