package actor

// Partitions (partition.go): callers running idle partitions inline
// (nested, for chains), messages queued behind them, Stop while a caller
// holds a partition, clock readings that went back.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed7fbd42b6/ratelimit/internal/bucket"
	"github.com/seed7fbd42b6/ratelimit/ratelimittest"
)

// manyCall is an independent (LimitMany) call: one member of count per item.
func manyCall(counts []float64, items ...Item) *Call {
	c := NewCall()
	for i, it := range items {
		m := int32(len(c.Members))
		a := c.AddItem(it, m, false)
		c.Members = append(c.Members, Member{Op: OpTake, Count: counts[i], First: a, Second: -1})
	}
	return c
}

// inlineMode reports whether g's callers may run idle partitions inline
// (not ACTOR_QUEUE_ONLY=1).
func inlineMode(g *Group) bool { return !g.parts[0].queue }

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

// A durable call that its caller runs on an idle partition hands its
// records to AppendOwn, and Group.Decide then calls CommitNow, so the
// log need not wake its writer for the caller's own commit. Records no
// CommitNow follows (a call over two partitions) go to Append. With
// ACTOR_QUEUE_ONLY=1 the partitions' goroutines run every call: Append.
func TestLoneCallerAppendsOwn(t *testing.T) {
	fl := &fakeLog{}
	g := newGroup(t, 2, fl, frozen)
	x, y := twoParts(g, tokenLim(10))
	want := 0
	if inlineMode(g) {
		want = 1
	}
	decide(t, g, takeCall(1, x))
	if owned, open := fl.ownState(); owned != want || open {
		t.Fatalf("after a lone call: %d AppendOwn calls (want %d), one without CommitNow: %v", owned, want, open)
	}
	decide(t, g, takeCall(1, x, y))
	if owned, open := fl.ownState(); owned != want || open {
		t.Fatalf("after a call over two partitions: %d AppendOwn calls (want %d), one without CommitNow: %v", owned, want, open)
	}
	if got := len(fl.records()); got != 3 {
		t.Fatalf("%d records logged, want 3", got)
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
	stopDone := async(g.Stop)
	p := g.parts[0]
	waitUntil(t, "Stop to begin", func() bool { return stopped(p) })
	for range 100 {
		runtime.Gosched()
	}
	select {
	case <-stopDone:
		t.Fatal("Stop returned while a caller held the partition")
	default:
	}
	close(rel)
	waitChan(t, held, "the holder")
	waitChan(t, stopDone, "Stop")
	c := takeCall(1, x)
	if _, err := g.Decide(context.Background(), c); err != nil || !errors.Is(c.FirstErr(), ErrClosed) {
		t.Errorf("Decide after Stop: %v, %v; want ErrClosed", err, c.FirstErr())
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

// blockingDecide makes c's last chain step block until rel is closed (after
// closing entered), then decide as usual. The step runs on whoever executes
// the last partition: with idle partitions, the caller, holding every
// partition of the chain.
func blockingDecide(c *Call) (entered, rel chan struct{}) {
	entered, rel = make(chan struct{}), make(chan struct{})
	c.decideHook = func(c *Call, now int64) bool {
		close(entered)
		<-rel
		c.decideHook = nil
		return decideAll(c, now)
	}
	return entered, rel
}

// pausedChain starts a chain taking count from x (partition 0) and y
// (partition 1) of limit 10 and waits until its last step is paused; w is
// another bucket on partition 0. Close rel to let the chain go on.
func pausedChain(t *testing.T, g *Group, count float64) (x, y, w Item, c *Call, rel chan struct{}, done <-chan struct{}) {
	t.Helper()
	lim := tokenLim(10)
	x, y = twoParts(g, lim)
	w = itemFor(g, lim, "n", keyOn(g, "n", 0, 1), 0)
	c = takeCall(count, x, y)
	entered, rel := blockingDecide(c)
	done = async(func() { decide(t, g, c) })
	waitChan(t, entered, "the chain's last step")
	return x, y, w, c, rel, done
}

// Group.Stop while a caller holds two partitions, nested (a chain run
// inline end to end, paused in its last step): Stop waits for the caller,
// the chain commits on both partitions (its commit to the outer partition
// is queued behind the caller and drained by it), and a message queued
// behind the caller on the lower partition still runs before that
// partition stops.
func TestStopWhileCallerNestedInChain(t *testing.T) {
	g := testGroup(2, NopLog{}, frozen)
	g.Start()
	x, y, w, c, rel, chainDone := pausedChain(t, g, 1)

	other := takeCall(3, w)
	otherDone := async(func() { decide(t, g, other) })
	if inlineMode(g) {
		waitUntil(t, "the take to queue behind the caller", func() bool { return inbox(g.parts[0]) == 1 })
	} else {
		waitChan(t, otherDone, "the take on partition 0's goroutine")
	}

	stopDone := async(g.Stop)
	waitUntil(t, "Stop to reach partition 1", func() bool { return stopped(g.parts[1]) })
	for range 100 {
		runtime.Gosched()
		select {
		case <-stopDone:
			t.Fatal("Stop returned while the chain's last step held partition 1")
		default:
		}
	}
	if stopped(g.parts[0]) {
		t.Fatal("partition 0 stopping before partition 1 has stopped")
	}
	close(rel)
	waitChan(t, chainDone, "the chain")
	waitChan(t, otherDone, "the queued take")
	waitChan(t, stopDone, "Stop")

	if err := c.FirstErr(); err != nil || !c.Members[0].OK || !c.Members[1].OK {
		t.Fatalf("chain: err %v, members %+v; want granted", err, c.Members)
	}
	if err := other.FirstErr(); err != nil || !other.Members[0].OK {
		t.Fatalf("take queued behind the caller: err %v, %+v; want granted", err, other.Members[0])
	}
	// Every goroutine has exited: read the tables directly.
	for _, tc := range []struct {
		it   Item
		want float64
	}{{x, 9}, {y, 9}, {w, 7}} {
		e, ok := g.parts[tc.it.Part].buckets.get(tc.it.Hash, tc.it.ID)
		if !ok || e.s.Value != tc.want {
			t.Errorf("%v: %v (stored %v), want %v", tc.it.ID, e.s.Value, ok, tc.want)
		}
	}
	for i, p := range g.parts {
		if len(p.held) != 0 || len(p.parked) != 0 {
			t.Errorf("partition %d: %d held, %d parked after Stop", i, len(p.held), len(p.parked))
		}
	}
}

// Messages queued behind a caller that holds a partition as the outer
// frame of a nested chain run in arrival order, after the chain's commit
// (queued there by the same caller from the inner partition).
func TestQueuedBehindNestedHolderKeepOrder(t *testing.T) {
	g := newGroup(t, 2, NopLog{}, frozen)
	x, _, w, c, rel, chainDone := pausedChain(t, g, 4)

	// Three takes of x (held by the chain) and two of w (free), in order.
	type req struct {
		c    *Call
		done <-chan struct{}
	}
	var reqs []req
	for i, tc := range []struct {
		it    Item
		count float64
	}{{x, 5}, {w, 6}, {x, 2}, {w, 5}, {x, 1}} {
		rc := takeCall(tc.count, tc.it)
		done := async(func() { decide(t, g, rc) })
		reqs = append(reqs, req{rc, done})
		if inlineMode(g) {
			waitUntil(t, "the take to queue behind the caller", func() bool { return inbox(g.parts[0]) == i+1 })
		} else if tc.it == w {
			waitChan(t, done, "the take of w")
		} else {
			waitUntil(t, "the take of x to park", func() bool { return parkedOn(t, g, 0, x.ID) == i/2+1 })
		}
	}
	close(rel)
	waitChan(t, chainDone, "the chain")
	for _, r := range reqs {
		waitChan(t, r.done, "a queued take")
	}
	if !c.Members[0].OK || !c.Members[1].OK {
		t.Fatalf("chain %+v, want granted", c.Members)
	}
	// x: 10 - 4 (chain) = 6, then 5 granted (1 left), 2 denied, 1 granted.
	// w: 6 granted (4 left), 5 denied.
	wantOK := []bool{true, true, false, false, true}
	for i, r := range reqs {
		if err := r.c.FirstErr(); err != nil || r.c.Members[0].OK != wantOK[i] {
			t.Errorf("take %d: err %v, OK %v; want OK %v", i, err, r.c.Members[0].OK, wantOK[i])
		}
	}
	if v := value(t, g, x); v != 0 {
		t.Errorf("x = %v, want 0", v)
	}
	if v := value(t, g, w); v != 4 {
		t.Errorf("w = %v, want 4", v)
	}
}

// A chain over three idle partitions whose goroutines never started runs
// end to end on the caller (three nested tokens; the commits to the outer
// two queue behind the caller and are drained by it), a denied one aborts
// the same way, and nothing stays held.
func TestNestedChainOnCaller(t *testing.T) {
	g := NewGroup(3, NopLog{}, frozen)
	lim := tokenLim(10)
	x := itemFor(g, lim, "n", keyOn(g, "n", 0, 0), 0)
	y := itemFor(g, lim, "n", keyOn(g, "n", 1, 0), 0)
	z := itemFor(g, lim, "n", keyOn(g, "n", 2, 0), 0)
	var granted, denied *Call
	done := async(func() {
		granted = takeCall(4, z, x, y)
		decide(t, g, granted)
		denied = takeCall(7, y, z, x)
		decide(t, g, denied)
	})
	waitChan(t, done, "chains on partitions whose goroutines never started")
	g.Start()
	defer g.Stop()
	if granted.FirstErr() != nil || !granted.Members[0].OK {
		t.Fatalf("first chain: %v %+v, want granted", granted.FirstErr(), granted.Members)
	}
	if denied.FirstErr() != nil || denied.Members[0].OK && denied.Members[1].OK && denied.Members[2].OK {
		t.Fatalf("second chain: %v %+v, want denied", denied.FirstErr(), denied.Members)
	}
	for _, it := range []Item{x, y, z} {
		if v := value(t, g, it); v != 6 {
			t.Errorf("%v = %v, want 6", it.ID, v)
		}
	}
	if h, p := holdsAndParked(t, g); h != 0 || p != 0 {
		t.Errorf("held %d parked %d", h, p)
	}
}

// Many callers over many mostly idle partitions (so chains run nested on
// callers, up to eight tokens deep) with commits acknowledged on another
// goroutine, cancellations and sweeps: every bucket lost exactly what was
// acknowledged (plus at most what abandoned one-partition takes asked),
// nothing stays held, and no Call is handed out twice.
func TestNestedStressDurable(t *testing.T) {
	const (
		parts   = 16
		workers = 24
		iters   = 200
		capac   = 400
	)
	g := newGroup(t, parts, newAsyncLog(t), frozen)
	lim := tokenLim(capac)
	var items []Item
	for p := int32(0); p < parts; p++ {
		items = append(items, itemFor(g, lim, "n", keyOn(g, "n", p, 0), 0))
	}
	index := make(map[BucketID]int)
	for i, it := range items {
		index[it.ID] = i
	}
	var tr callTracker
	acked := make([]atomic.Int64, len(items))
	abandoned := make([]atomic.Int64, len(items))
	done := spawn(workers, 0, 11, func(r *rand.Rand) {
		for range iters {
			switch op := r.IntN(10); {
			case op < 6: // a chain over 2..8 buckets (repeats allowed)
				var its []Item
				for range 2 + r.IntN(7) {
					its = append(its, items[r.IntN(len(items))])
				}
				c, o := tr.get(takeCall(float64(1+r.IntN(2)), its...))
				decide(t, g, c)
				if err := c.FirstErr(); err != nil {
					t.Errorf("chain: %v", err)
				}
				ackGranted(c, index, acked)
				tr.done(c, o, false)
				c.Release()
			case op < 9: // a cancelable one-partition take
				k := r.IntN(len(items))
				trackedTake(t, g, &tr, items[k], 1+r.IntN(2), &acked[k], &abandoned[k])
			default:
				g.Run(r.IntN(parts), func(p *Partition) { p.Sweep(t0, nil) })
			}
		}
	})
	waitChan(t, done, "every caller (deadlock?)")
	if n := tr.dups(); n != 0 {
		t.Fatalf("a Call was handed out %d times while still in use", n)
	}
	for k, it := range items {
		v := value(t, g, it)
		spent, a, ab := capac-v, float64(acked[k].Load()), float64(abandoned[k].Load())
		if v < 0 || spent < a || spent > a+ab {
			t.Errorf("bucket %v: value %v, spent %v, acknowledged %v, abandoned %v", it.ID, v, spent, a, ab)
		}
	}
	if h, p := holdsAndParked(t, g); h != 0 || p != 0 {
		t.Errorf("held %d parked %d after every call ended", h, p)
	}
}

// A chain step parked on a partition that stops is aborted: the earlier
// partitions release what it held there, and its caller returns.
func TestParkedChainAbortedOnStop(t *testing.T) {
	g := newGroup(t, 3, NopLog{}, frozen)
	lim := tokenLim(10)
	w := itemFor(g, lim, "n", keyOn(g, "n", 0, 0), 0)
	x := itemFor(g, lim, "n", keyOn(g, "n", 1, 0), 0)
	z := itemFor(g, lim, "n", keyOn(g, "n", 2, 0), 0)

	unblock2 := blockPartition(t, g, 2)
	c1 := takeCall(1, x, z) // holds x on 1, waits on 2
	c1Done := async(func() { decide(t, g, c1) })
	waitUntil(t, "c1 to hold x", func() bool { return inbox(g.parts[2]) == 1 })
	c2 := takeCall(1, w, x) // holds w on 0, parks on x at 1
	c2Done := async(func() { decide(t, g, c2) })
	waitUntil(t, "c2 to park on x", func() bool { return parkedOn(t, g, 1, x.ID) == 1 })

	waitChan(t, async(g.parts[1].stop), "partition 1 to stop")
	waitChan(t, c2Done, "the parked chain's caller")
	if !errors.Is(c2.FirstErr(), ErrClosed) {
		t.Errorf("c2 FirstErr = %v, want ErrClosed", c2.FirstErr())
	}
	var held int
	g.Run(0, func(p *Partition) { held = len(p.held) })
	if held != 0 {
		t.Errorf("partition 0 still holds %d buckets for the aborted chain", held)
	}
	if v := value(t, g, w); v != 10 {
		t.Errorf("w = %v, want 10", v)
	}
	unblock2()
	waitChan(t, c1Done, "c1")
}

// An independent call over two partitions (LimitMany) decides the spans its
// caller runs inline at Call.now, the reading taken in Group.phase, unless
// the partition has used a later reading since (Partition.processAt). Here
// the bucket is dropped as full (by a sweep; a credit or a reset do the
// same) at a later reading in between: decided at the older reading, the
// span would recreate it fresh with an earlier ts (or in an earlier fixed
// window) than the time it was known full, and the next decision would
// refill over time already counted. Absent = full only holds at or after
// the drop; a present bucket's ts protects a stale decision (elapsed time
// below zero counts as zero).
//
// The grants on one bucket over 60 s (one period) must stay within
// capacity + rate * elapsed (token bucket) or two windows' worth (fixed
// window, the span touching two windows).
func TestManyStaleReadingAfterDropDoesNotOverAdmit(t *testing.T) {
	const (
		S = int64(time.Second)
		M = int64(time.Minute)
	)
	cases := []struct {
		name string
		lim  bucket.Limit
		// first take at first, the LimitMany reads at stale, the sweep
		// and the last take run at later.
		first, stale, later int64
		last                float64 // what the take at later asks
		bound               float64 // most the bucket may grant over [first, later]
	}{
		{
			name:  "token bucket",
			lim:   bucket.Limit{Kind: bucket.TokenBucket, Rate: 10, Period: M, Capacity: 10},
			first: t0, stale: t0 + S, later: t0 + M,
			last:  9,       // 59 s of refill since the stale reading: 9.83
			bound: 10 + 10, // capacity + rate * 60 s
		},
		{
			name:  "fixed window",
			lim:   bucket.Limit{Kind: bucket.FixedWindow, Rate: 10, Period: M, Capacity: 10},
			first: t0 - t0%M + M + S, stale: t0 - t0%M + M + 50*S, later: t0 - t0%M + 2*M + S,
			last:  10,
			bound: 10 + 10, // [first, later] touches two windows
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := ratelimittest.NewClock(time.Unix(0, tc.first))
			// afterRead, when set, runs once right after the next clock
			// reading, on the reader's goroutine: someone else ran between
			// that reading and what the reader does with it.
			var afterRead atomic.Pointer[func()]
			read := func() int64 {
				now := clk.Now().UnixNano()
				if f := afterRead.Swap(nil); f != nil {
					(*f)()
				}
				return now
			}
			g := NewGroup(2, NopLog{}, read) // never started: every span runs inline
			lim := tc.lim
			x, y := itemFor(g, &lim, "n", keyOn(g, "n", 0, 0), 0), itemFor(g, &lim, "n", keyOn(g, "n", 1, 0), 0)
			granted := 0.0
			take := func(count float64) {
				c := takeCall(count, y)
				decide(t, g, c)
				if c.Members[0].OK {
					granted += count
				}
				c.Release()
			}

			take(10) // y empty at first

			// The LimitMany caller reads the clock at stale; before it runs
			// its spans, the periodic sweep runs on y's partition at later,
			// when y has refilled, and drops it.
			clk.Set(time.Unix(0, tc.stale))
			dropped := 0
			sweep := func() {
				clk.Set(time.Unix(0, tc.later))
				g.Run(int(y.Part), func(p *Partition) { dropped = p.Sweep(tc.later, nil) })
			}
			afterRead.Store(&sweep)
			c := manyCall([]float64{1, 10}, x, y)
			decide(t, g, c)
			if dropped != 1 {
				t.Fatalf("the sweep dropped %d buckets, want y", dropped)
			}
			if c.Members[1].OK {
				granted += 10
			}
			c.Release()

			take(tc.last) // at later
			if s, ok := state(t, g, y); ok {
				t.Logf("y after the last take: %+v", s)
			}
			if granted > tc.bound {
				t.Fatalf("granted %v tokens of y within %v, the limit allows %v",
					granted, time.Duration(tc.later-tc.first), tc.bound)
			}
		})
	}
}
