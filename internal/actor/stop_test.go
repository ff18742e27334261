package actor

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
)

// After Stop, every kind of call returns at once with ErrClosed.
func TestCallsAfterStop(t *testing.T) {
	g := NewGroup(3, NopLog{}, frozen)
	g.Start()
	lim := tokenLim(10)
	x := itemFor(g, lim, "n", keyOn(g, "n", 0, 0), 0)
	y := itemFor(g, lim, "n", keyOn(g, "n", 1, 0), 0)
	z := itemFor(g, lim, "n", keyOn(g, "n", 2, 0), 0)
	g.Stop()
	g.Stop() // twice is fine

	done := async(func() {
		for _, c := range []*Call{takeCall(1, x), takeCall(1, x, y, z), twoCall(1, false, x, y)} {
			if _, err := g.Decide(context.Background(), c); err != nil {
				t.Errorf("Decide after Stop: %v", err)
			}
			if !errors.Is(c.FirstErr(), ErrClosed) {
				t.Errorf("Decide over %d items after Stop: FirstErr %v, want ErrClosed", len(c.Items), c.FirstErr())
			}
			c.Release()
		}
		for _, f := range []func(*Call){g.Peek, g.Reset} {
			c := NewCall()
			c.AddItem(x, -1, false)
			c.AddItem(y, -1, false)
			f(c)
			if !errors.Is(c.FirstErr(), ErrClosed) {
				t.Errorf("Peek/Reset after Stop: %v", c.FirstErr())
			}
			c.Release()
		}
		if g.Run(0, func(*Partition) { t.Error("Run ran on a stopped partition") }) {
			t.Error("Run on a stopped partition reported true")
		}
		g.Counts()
	})
	waitChan(t, done, "calls on a stopped group")
}

// A chain whose next partition has stopped aborts: the hold it took is
// released, nothing is consumed, the caller gets ErrClosed.
func TestChainNextPartitionStopped(t *testing.T) {
	g := newGroup(t, 2, NopLog{}, frozen)
	x, y := twoParts(g, tokenLim(10))
	g.parts[1].stop()
	c := takeCall(1, x, y)
	waitChan(t, async(func() { decide(t, g, c) }), "the chain")
	if !errors.Is(c.FirstErr(), ErrClosed) {
		t.Fatalf("FirstErr = %v, want ErrClosed", c.FirstErr())
	}
	var held int
	g.Run(0, func(p *Partition) { held = len(p.held) })
	if held != 0 {
		t.Fatalf("partition 0 still holds %d buckets", held)
	}
	if v := value(t, g, x); v != 10 {
		t.Fatalf("x = %v, want 10", v)
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

// Stop while a chain holds buckets on a partition that is stopped before
// the chain's last partition decides: the caller must not both be told
// ErrClosed and have had its tokens consumed ("an error consumes
// nothing"), and the call must stay all-or-nothing.
//
// Fails today: Group.Stop stops partitions in increasing order, but a
// chain's commit travels towards lower partitions, so the last partition
// commits its own part, finds the earlier one stopped, and reports
// ErrClosed for a call it half committed.
func TestStopMidChainIsAllOrNothing(t *testing.T) {
	fl := &fakeLog{}
	g := testGroup(2, fl, frozen)
	g.Start()
	lim := tokenLim(10)
	x, y := twoParts(g, lim)

	unblock := blockPartition(t, g, 1)
	c := takeCall(1, x, y)
	cDone := async(func() { decide(t, g, c) })
	waitUntil(t, "the chain to hold x and reach partition 1", func() bool { return inbox(g.parts[1]) == 1 })
	stopped := async(g.Stop)
	// Whatever order Stop takes, by the time partition 1 is told to stop
	// the partitions it stops first are done.
	waitUntil(t, "Stop to reach partition 1", func() bool {
		p := g.parts[1]
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.stopped
	})
	unblock()
	waitChan(t, cDone, "the chain's caller")
	waitChan(t, stopped, "Stop")

	// Partitions have exited: their maps can be read directly.
	_, xStored := g.parts[0].buckets.get(x.Hash, x.ID)
	_, yStored := g.parts[1].buckets.get(y.Hash, y.ID)
	err := c.FirstErr()
	t.Logf("caller: err=%v members=%+v; x stored %v, y stored %v; log %+v", err, c.Members, xStored, yStored, fl.records())
	if xStored != yStored {
		t.Errorf("half-committed chain: x stored %v, y stored %v", xStored, yStored)
	}
	if err != nil && (xStored || yStored || len(fl.records()) > 0) {
		t.Errorf("caller told %v, but its grant was stored/logged", err)
	}
}

// Stop while callers of every kind are in flight (single takes, chains,
// parked messages, two-choice takes, checks, resets, peeks, counters):
// every caller returns, items of calls that could not run carry ErrClosed,
// and no bucket went below zero.
func TestStopWithCallsInFlight(t *testing.T) {
	for round := 0; round < 5; round++ {
		stopInFlight(t, uint64(round))
	}
}

func stopInFlight(t *testing.T, seed uint64) {
	const (
		parts   = 4
		workers = 40
		capac   = 300
	)
	g := testGroup(parts, NopLog{}, frozen)
	g.Start()
	lim := tokenLim(capac)
	var items []Item
	for p := int32(0); p < parts; p++ {
		for i := 0; i < 2; i++ {
			items = append(items, itemFor(g, lim, "n", keyOn(g, "n", p, i), 0))
		}
	}
	index := make(map[BucketID]int)
	for i, it := range items {
		index[it.ID] = i
	}
	acked := make([]atomic.Int64, len(items))
	var ops atomic.Int64
	var stop atomic.Bool
	started := make(chan struct{})
	var startOnce sync.Once
	done := spawn(workers, seed*1000, 5, func(r *rand.Rand) {
		for !stop.Load() {
			if ops.Add(1) == 2000 {
				startOnce.Do(func() { close(started) })
			}
			pick := func() Item { return items[r.IntN(len(items))] }
			switch op := r.IntN(8); op {
			case 0, 1, 2: // chains (and one-partition atomics)
				c := takeCall(1, pick(), pick(), pick())
				decide(t, g, c)
				account(t, c, index, acked)
				c.Release()
			case 3:
				c := takeCall(1, pick())
				if decideCancelable(t, g, c, 1+r.IntN(2)) {
					continue
				}
				account(t, c, index, acked)
				c.Release()
			case 4:
				a, b := pick(), pick()
				if a.ID == b.ID {
					continue
				}
				c := twoCall(1, false, a, b)
				decide(t, g, c)
				if err := c.FirstErr(); err != nil && !errors.Is(err, ErrClosed) {
					t.Errorf("two-choice error: %v", err)
				}
				c.Release()
			case 5:
				c := NewCall()
				c.AddItem(pick(), -1, false)
				c.AddItem(pick(), -1, false)
				g.Peek(c)
				c.Release()
			case 6:
				c := takeCall(1, pick(), pick())
				c.Members[0].Op, c.Members[1].Op = OpCheck, OpCheck
				decide(t, g, c)
				c.Release()
			case 7:
				g.Counts()
			}
		}
	})
	waitChan(t, started, "the workers to get going")
	waitChan(t, async(g.Stop), "Stop with calls in flight")
	stop.Store(true)
	waitChan(t, done, "every caller to return after Stop")
	for k, it := range items {
		p := g.parts[it.Part] // exited: read directly
		v := float64(capac)
		if e, ok := p.buckets.get(it.Hash, it.ID); ok {
			v = e.s.Value
		}
		if v < 0 {
			t.Errorf("bucket %v over-admitted: %v", it.ID, v)
		}
		if capac-v < float64(acked[k].Load()) {
			t.Errorf("bucket %v lost %v tokens but %v were acknowledged", it.ID, capac-v, acked[k].Load())
		}
	}
}

// account adds an atomic take's acknowledged tokens per bucket.
func account(t *testing.T, c *Call, index map[BucketID]int, acked []atomic.Int64) {
	if err := c.FirstErr(); err != nil {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("unexpected error: %v", err)
		}
		return
	}
	ackGranted(c, index, acked)
}
