package actor

import (
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/seed7fbd42b6/ratelimit/internal/wal"
)

// inlineMode reports whether g's callers may run idle partitions inline
// (not ACTOR_QUEUE_ONLY=1).
func inlineMode(g *Group) bool { return !g.parts[0].queue }

// stopped reports whether partition p has begun to stop.
func stopped(p *Partition) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stopped
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
func TestReviewStopWhileCallerNestedInChain(t *testing.T) {
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
func TestReviewQueuedBehindNestedHolderKeepOrder(t *testing.T) {
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
func TestReviewNestedChainOnCaller(t *testing.T) {
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

// With exactly 256 partitions (the new default, 8 x GOMAXPROCS, on a
// 32-processor machine), grouping a non-atomic call whose items are not in
// partition order panics: countingSort's stack array of 256 counters is
// used for len(parts)+1 = 257 of them (group.go:274, `<=` should be `<`).
// Limiter.Value and Limiter.Reset of a sharded limit reach it whenever a
// key's shards wrap around partition N-1 to 0.
func TestReviewCountingSort256Partitions(t *testing.T) {
	g := newGroup(t, 256, NopLog{}, frozen)
	lim := tokenLim(10)
	a := itemFor(g, lim, "n", keyOn(g, "n", 255, 0), 0)
	b := itemFor(g, lim, "n", keyOn(g, "n", 0, 0), 0)
	c := NewCall()
	defer c.Release()
	c.AddItem(a, -1, false)
	c.AddItem(b, -1, false)
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("Peek over partitions 255 and 0 of 256 panicked: %v", r)
			}
		}()
		g.Peek(c)
	}()
	if err := c.FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// asyncLog commits on its own goroutine, one waiter at a time, in order.
type asyncLog struct{ ch chan wal.Waiter }

func newAsyncLog(t testing.TB) *asyncLog {
	l := &asyncLog{ch: make(chan wal.Waiter, 1024)}
	done := async(func() {
		for w := range l.ch {
			w.Committed(nil)
		}
	})
	t.Cleanup(func() { close(l.ch); <-done })
	return l
}

func (l *asyncLog) Append(_ []wal.Record, w wal.Waiter) { l.ch <- w }
func (l *asyncLog) Err() error                          { return nil }

// Many callers over many mostly idle partitions (so chains run nested on
// callers, up to eight tokens deep) with commits acknowledged on another
// goroutine, cancellations and sweeps: every bucket lost exactly what was
// acknowledged (plus at most what abandoned one-partition takes asked),
// nothing stays held, and no Call is handed out twice.
func TestReviewNestedStressDurable(t *testing.T) {
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
