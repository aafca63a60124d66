package rlock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	rlock "github.com/redis-rlock/redis-rlock/go"
	"github.com/redis-rlock/redis-rlock/go/internal/redisserver"
)

// TestMain gives the examples a server of their own, as $REDIS_URL (the
// tests start their own); with holdAndExitEnv set it is that program instead.
func TestMain(m *testing.M) {
	if url := os.Getenv(holdAndExitEnv); url != "" {
		holdAndExit(url)
	}
	s, stop, err := redisserver.StartForRun()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("REDIS_URL", s.URL())
	code := m.Run()
	stop()
	os.Exit(code)
}

func ExampleMutex_Lock() {
	ctx := context.Background()
	client, err := rlock.Connect(ctx, "") // $REDIS_URL, else redis://127.0.0.1:6379
	if err != nil {
		panic(err)
	}
	defer client.Close()

	m := client.Mutex("example:product:1001", rlock.WithTTL(10*time.Second))
	held, err := m.Lock(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("held with a fencing token:", held.FencingToken() > 0)
	if err := held.Unlock(ctx); err != nil {
		panic(err)
	}
	// Output: held with a fencing token: true
}

func ExampleMutex_TryLock() {
	ctx := context.Background()
	client, _ := rlock.Connect(ctx, "")
	defer client.Close()

	held, _ := client.Mutex("example:job").Lock(ctx)
	defer held.Unlock(ctx)
	_, err := client.Mutex("example:job").TryLock(ctx)
	fmt.Println(errors.Is(err, rlock.ErrNotObtained))
	// Output: true
}

func ExampleHeld_Lost() {
	ctx := context.Background()
	client, _ := rlock.Connect(ctx, "")
	defer client.Close()

	m := client.Mutex("example:lease", rlock.WithTTL(200*time.Millisecond), rlock.WithoutAutoRenew())
	held, _ := m.Lock(ctx)
	<-held.Lost() // closed when the unrenewed lease ends
	fmt.Println(errors.Is(held.Unlock(ctx), rlock.ErrLost))
	// Output: true
}

func ExampleClient_Cached() {
	ctx := context.Background()
	client, _ := rlock.Connect(ctx, "")
	defer client.Close()

	load := func(context.Context) ([]byte, error) {
		fmt.Println("loading")
		return []byte("price 12"), nil
	}
	for i := 0; i < 2; i++ {
		v, err := client.Cached(ctx, "example:product:1001", load, rlock.WithTTL(5*time.Minute), rlock.WithStale(time.Minute))
		if err != nil {
			panic(err)
		}
		fmt.Println(string(v))
	}
	// Output:
	// loading
	// price 12
	// price 12
}
