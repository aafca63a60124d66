package rlock_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	rlock "github.com/redis-rlock/redis-rlock/go"
	"github.com/redis-rlock/redis-rlock/go/internal/redisserver"
)

// holdAndExitEnv, when set to a URL, makes the test binary a program that
// takes a lock there, says so, and exits without Close (see TestMain).
const holdAndExitEnv = "RLOCK_TEST_HOLD_AND_EXIT"

func holdAndExit(url string) {
	ctx := context.Background()
	c, err := rlock.Connect(ctx, url)
	if err == nil {
		_, err = c.Mutex("left", rlock.WithTTL(time.Second)).Lock(ctx)
	}
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Println("held")
	os.Exit(0)
}

func TestAProgramThatExitsWithoutCloseHoldsNothingPastItsLease(t *testing.T) {
	s := redisserver.Start(t)
	ctx := within(t, 30*time.Second)
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), holdAndExitEnv+"="+s.URL())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line != "held\n" {
		t.Fatalf("the program said %q", line)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the program's exit: %v", err)
	}
	// Its lease runs down from at most its length, never renewed again,
	// and the lock is free when it ends.
	last := int64(time.Second / time.Millisecond)
	for {
		v, ok := s.Value("PTTL", "rlock:{left}")
		ms, _ := strconv.ParseInt(v, 10, 64)
		if !ok || ms == -2 {
			break
		}
		if ms < 0 || ms > last {
			t.Fatalf("the lease after exit: PTTL %d after %d", ms, last)
		}
		last = ms
		if ctx.Err() != nil {
			t.Fatal("the lock outlived its lease by the test's deadline")
		}
		time.Sleep(20 * time.Millisecond)
	}
	c := connect(t, s)
	h, err := c.Mutex("left").TryLock(ctx)
	if err != nil {
		t.Fatalf("after the lease: %v", err)
	}
	h.Unlock(ctx)
}
