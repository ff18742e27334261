package actor

// The call protocol (call.go): a caller that gives up (its context ends)
// before, while and after its call is taken up consumes nothing it was not
// told of, and never blocks a partition.

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"testing"
)

// A single-message call abandoned before its partition takes it up
// consumes nothing, and the partition recycles it.
func TestCancelBeforeClaimConsumesNothing(t *testing.T) {
	g := newGroup(t, 2, NopLog{}, frozen)
	lim := tokenLim(10)
	x := itemFor(g, lim, "n", keyOn(g, "n", 0, 0), 0)

	unblock := blockPartition(t, g, 0)
	ctx, cancel := context.WithCancel(context.Background())
	c := takeCall(3, x)
	var abandoned bool
	var err error
	done := async(func() { abandoned, err = g.Decide(ctx, c) })
	waitUntil(t, "the call to reach partition 0", func() bool { return inbox(g.parts[0]) == 1 })
	cancel()
	waitChan(t, done, "Decide to return after cancel")
	if !abandoned || !errors.Is(err, context.Canceled) {
		t.Fatalf("Decide = (%v, %v), want (true, context.Canceled)", abandoned, err)
	}
	unblock()
	if v := value(t, g, x); v != 10 {
		t.Fatalf("value after abandoned call = %v, want 10 (nothing consumed)", v)
	}
	if n := g.Counts(); n.Grants != 0 || n.Denials != 0 {
		t.Fatalf("counts after abandoned call = %+v, want none", n)
	}
	// The group still works.
	c2 := takeCall(3, x)
	decide(t, g, c2)
	if !c2.Members[0].OK || c2.Members[0].Left != 7 {
		t.Fatalf("later take = %+v, want OK with 7 left", c2.Members[0])
	}
	c2.Release()
}

// A call that finished before its context ended is not reported abandoned,
// even if the context is already canceled when the caller looks.
func TestCancelAfterDoneIsNotAbandoned(t *testing.T) {
	g := newGroup(t, 1, NopLog{}, frozen)
	x := itemFor(g, tokenLim(10), "n", "a", 0)
	for i := 0; i < 200; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		c := takeCall(0, x) // count 0: always granted
		go cancel()
		abandoned, err := g.Decide(ctx, c)
		if err != nil && !abandoned {
			t.Fatalf("Decide = (false, %v): an error must mean abandoned for a one-partition call", err)
		}
		if err == nil {
			if !c.Members[0].OK {
				t.Fatalf("take 0 denied: %+v", c.Members[0])
			}
			c.Release()
		}
	}
}

// A call taken up, written and waiting for a slow commit when its caller
// gives up may still be granted (documented); the partition then releases
// it after the commit, and nothing hangs.
func TestCancelWhileCommitPending(t *testing.T) {
	fl := &fakeLog{hold: true, appended: make(chan struct{}, 1)}
	g := newGroup(t, 1, fl, frozen)
	x := itemFor(g, tokenLim(10), "n", "a", 0)
	ctx, cancel := context.WithCancel(context.Background())
	c := takeCall(4, x)
	var abandoned bool
	var err error
	done := async(func() { abandoned, err = g.Decide(ctx, c) })
	waitChan(t, fl.appended, "the grant to reach the log")
	select {
	case <-done:
		t.Fatal("Decide returned before the commit")
	default:
	}
	cancel()
	waitChan(t, done, "Decide to return after cancel")
	if !abandoned || err == nil {
		t.Fatalf("Decide = (%v, %v), want abandoned with ctx error", abandoned, err)
	}
	fl.release(nil) // the partition's batch waiter releases the call
	if v := value(t, g, x); v != 6 {
		t.Fatalf("value = %v, want 6 (a taken-up grant stands)", v)
	}
}

// Abandoning a call whose message is parked behind a hold: the caller
// returns at once, the partition skips or decides it later, and nothing
// is lost or run twice.
func TestCancelWhileParked(t *testing.T) {
	g := newGroup(t, 2, NopLog{}, frozen)
	lim := tokenLim(10)
	x := itemFor(g, lim, "n", keyOn(g, "n", 0, 0), 0)
	y := itemFor(g, lim, "n", keyOn(g, "n", 1, 0), 0)

	unblock := blockPartition(t, g, 1)
	chain := takeCall(1, x, y)
	chainDone := async(func() { decide(t, g, chain) })
	waitUntil(t, "the chain to hold x and reach partition 1", func() bool { return inbox(g.parts[1]) == 1 })

	ctx, cancel := context.WithCancel(context.Background())
	d := takeCall(2, x)
	var abandoned bool
	var err error
	dDone := async(func() { abandoned, err = g.Decide(ctx, d) })
	waitUntil(t, "the take to park on x", func() bool { return parkedOn(t, g, 0, x.ID) == 1 })
	cancel()
	waitChan(t, dDone, "the parked call's Decide to return after cancel")
	if !abandoned || err == nil {
		t.Fatalf("Decide = (%v, %v), want abandoned", abandoned, err)
	}
	unblock()
	waitChan(t, chainDone, "the chain")
	if !chain.Members[0].OK || chain.FirstErr() != nil {
		t.Fatalf("chain: %+v err %v", chain.Members, chain.FirstErr())
	}
	chain.Release()
	if v := value(t, g, x); v != 9 && v != 7 {
		t.Fatalf("x = %v, want 9 (abandoned take skipped) or 7 (taken up)", v)
	}
	if h, p := holdsAndParked(t, g); h != 0 || p != 0 {
		t.Fatalf("held %d parked %d after everything ended", h, p)
	}
}

// Stress: many callers on few buckets with contexts canceled at random
// moments. With a frozen clock, what the buckets lost is at least what
// was acknowledged and at most that plus the abandoned calls; no Call is
// ever handed out while still in use (double release / use after release).
// In memory mode a call finishes with its batch; with a log it finishes
// through its waiter (kept in the call: msgWaiter), possibly after its
// caller abandoned it.
func TestCancelStress(t *testing.T) {
	t.Run("memory", func(t *testing.T) { cancelStress(t, NopLog{}) })
	t.Run("log", func(t *testing.T) { cancelStress(t, newAsyncLog(t)) })
}

func cancelStress(t *testing.T, log Log) {
	const (
		parts   = 2
		workers = 32
		iters   = 300
		capac   = 1e6
	)
	g := newGroup(t, parts, log, frozen)
	lim := tokenLim(capac)
	var items []Item
	for p := int32(0); p < parts; p++ {
		for i := 0; i < 2; i++ {
			items = append(items, itemFor(g, lim, "n", keyOn(g, "n", p, i), 0))
		}
	}
	var tr callTracker
	acked := make([]atomic.Int64, len(items))
	abandonedN := make([]atomic.Int64, len(items))
	done := spawn(workers, 0, 7, func(r *rand.Rand) {
		for i := 0; i < iters; i++ {
			k := r.IntN(len(items))
			trackedTake(t, g, &tr, items[k], r.IntN(3), &acked[k], &abandonedN[k])
		}
	})
	waitChan(t, done, "the workers")
	if n := tr.dups(); n != 0 {
		t.Fatalf("a Call was handed out %d times while still in use", n)
	}
	for k, it := range items {
		spent := capac - value(t, g, it)
		a, ab := float64(acked[k].Load()), float64(abandonedN[k].Load())
		if spent < a || spent > a+ab {
			t.Errorf("bucket %v: spent %v, acknowledged %v, abandoned %v", it.ID, spent, a, ab)
		}
	}
}
