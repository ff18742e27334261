package actor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
)

// A caller that finds its partition idle decides on its own goroutine: the
// partitions' goroutines are never started here, yet calls complete.
func TestCallerRunsIdlePartition(t *testing.T) {
	g := NewGroup(2, NopLog{}, frozen)
	lim := tokenLim(10)
	x := itemFor(g, lim, "n", keyOn(g, "n", 0, 0), 0)
	y := itemFor(g, lim, "n", keyOn(g, "n", 1, 0), 0)
	done := async(func() {
		for range 3 {
			decide(t, g, takeCall(2, x))
		}
		many := takeCall(1, x, y) // two partitions, independent (not atomic)
		many.Atomic = false
		decide(t, g, many)
		ran := false
		if !g.Run(1, func(*Partition) { ran = true }) || !ran {
			t.Error("Run on an idle, never started partition did not run")
		}
	})
	waitChan(t, done, "calls on partitions whose goroutines never started")
	g.Start()
	defer g.Stop()
	if got := value(t, g, x); got != 3 {
		t.Errorf("x: %v tokens left, want 10 - 3x2 - 1 = 3", got)
	}
	if got := value(t, g, y); got != 9 {
		t.Errorf("y: %v tokens left, want 9", got)
	}
}

// Messages that queue while a caller holds a partition are run by that
// caller (one more batch) or, if more arrive meanwhile, handed to the
// partition's goroutine: none is left behind.
func TestQueuedBehindCallerAreHandedOn(t *testing.T) {
	g := newGroup(t, 1, NopLog{}, frozen)
	x := itemFor(g, tokenLim(10), "n", "k", 0)

	entered1, rel1 := make(chan struct{}), make(chan struct{})
	run1 := async(func() { g.Run(0, func(*Partition) { close(entered1); <-rel1 }) })
	waitChan(t, entered1, "the first Run to hold the partition")

	// Queued behind the first Run: the holder runs it in its extra batch.
	entered2, rel2 := make(chan struct{}), make(chan struct{})
	run2 := async(func() { g.Run(0, func(*Partition) { close(entered2); <-rel2 }) })
	waitUntil(t, "the second Run to queue", func() bool { return inbox(g.parts[0]) == 1 })
	close(rel1)
	waitChan(t, entered2, "the holder to run the queued Run")

	// Queued while the holder runs its extra batch: left for the goroutine.
	take := async(func() { decide(t, g, takeCall(4, x)) })
	waitUntil(t, "the take to queue", func() bool { return inbox(g.parts[0]) == 1 })
	close(rel2)
	waitChan(t, run1, "the holder to give the partition up")
	waitChan(t, run2, "the second Run")
	waitChan(t, take, "the take handed to the partition's goroutine")
	if got := value(t, g, x); got != 6 {
		t.Errorf("%v tokens left, want 6", got)
	}
}

// Stop waits for a caller that holds a partition; calls after it fail.
func TestStopWaitsForCallerHoldingPartition(t *testing.T) {
	g := NewGroup(1, NopLog{}, frozen)
	g.Start()
	x := itemFor(g, tokenLim(10), "n", "k", 0)
	entered, rel := make(chan struct{}), make(chan struct{})
	held := async(func() {
		g.Run(0, func(p *Partition) {
			close(entered)
			<-rel
			p.counts.Grants++ // partition state, touched by the holder only
		})
	})
	waitChan(t, entered, "the caller to hold the partition")
	stopped := async(g.Stop)
	p := g.parts[0]
	waitUntil(t, "Stop to begin", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.stopped
	})
	for range 100 {
		runtime.Gosched()
	}
	select {
	case <-stopped:
		t.Fatal("Stop returned while a caller held the partition")
	default:
	}
	close(rel)
	waitChan(t, held, "the holder")
	waitChan(t, stopped, "Stop")
	c := takeCall(1, x)
	if _, err := g.Decide(context.Background(), c); err != nil || !errors.Is(c.FirstErr(), ErrClosed) {
		t.Errorf("Decide after Stop: %v, %v; want ErrClosed", err, c.FirstErr())
	}
}

// Shard s of a bucket sits on partition (hash + s/2) mod N: shards 2k and
// 2k+1 share one, and a limit's pairs cover min(N, shards/2) partitions.
func TestRoutePairs(t *testing.T) {
	const n = 16
	g := NewGroup(n, NopLog{}, frozen)
	for h := range uint64(64) {
		if p := g.Route(h, 0); p != int32(h%n) {
			t.Fatalf("hash %d: shard 0 on %d, want %d", h, p, h%n)
		}
		for _, shards := range []uint32{2, 3, 16, 64} {
			parts := map[int32]bool{}
			for s := range shards {
				p := g.Route(h, s)
				parts[p] = true
				if q := g.Route(h, s^1); p != q {
					t.Fatalf("hash %d: shard %d on %d, its mate %d on %d", h, s, p, s^1, q)
				}
			}
			if want := min(n, int(shards+1)/2); len(parts) != want {
				t.Fatalf("hash %d: %d shards on %d partitions, want %d", h, shards, len(parts), want)
			}
		}
	}
}

// A panic (or runtime.Goexit) while a caller runs a partition crashes the
// process, as a panic on the partition's goroutine would, even if the
// caller recovers: the partition must not be left held, half-updated,
// with other callers waiting forever.
func TestPanicOnCallerCrashes(t *testing.T) {
	switch os.Getenv("ACTOR_PANIC_CHILD") {
	case "panic":
		g := NewGroup(1, NopLog{}, frozen)
		func() {
			defer func() { _ = recover() }()
			g.Run(0, func(*Partition) { panic("boom") })
		}()
		fmt.Println("the caller recovered and carried on")
		os.Exit(0)
	case "goexit":
		g := NewGroup(1, NopLog{}, frozen)
		<-async(func() { g.Run(0, func(*Partition) { runtime.Goexit() }) })
		fmt.Println("the caller exited and the process carried on")
		os.Exit(0)
	}
	for _, tc := range []struct{ mode, want string }{
		{"panic", "ratelimit: partition panicked on a caller's goroutine: boom"},
		{"goexit", "ratelimit: partition panicked on a caller's goroutine: runtime.Goexit"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestPanicOnCallerCrashes$", "-test.count=1")
		cmd.Env = append(os.Environ(), "ACTOR_PANIC_CHILD="+tc.mode)
		out, err := cmd.CombinedOutput()
		if err == nil || ctx.Err() != nil {
			t.Fatalf("%s child: err %v, ctx %v; want a crash\n%s", tc.mode, err, ctx.Err(), out)
		}
		cancel()
		if !strings.Contains(string(out), tc.want) {
			t.Fatalf("%s child output lacks %q:\n%s", tc.mode, tc.want, out)
		}
		if strings.Contains(string(out), "carried on") {
			t.Fatalf("%s: the process carried on:\n%s", tc.mode, out)
		}
	}
}
