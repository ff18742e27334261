package actor

// Atomic calls over several partitions (chain.go): holds, parking, commit
// and abort along the chain.

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"testing"
)

// holdX starts an atomic take of 1 on x and y with partition 1 blocked, and
// returns once x is held on partition 0 and the chain waits in partition
// 1's inbox.
func holdX(t *testing.T, g *Group, x, y Item) (c *Call, unblock func(), done <-chan struct{}) {
	t.Helper()
	unblock = blockPartition(t, g, 1)
	c = takeCall(1, x, y)
	done = async(func() { decide(t, g, c) })
	waitUntil(t, "the chain to hold x and reach partition 1", func() bool { return inbox(g.parts[1]) == 1 })
	return c, unblock, done
}

// A held bucket is changed by no one else until its commit: takes, resets,
// credits and reads that touch it park, and run after the release in the
// order they arrived.
func TestHeldBucketIsolatedAndParkedInOrder(t *testing.T) {
	g := newGroup(t, 2, NopLog{}, frozen)
	lim := tokenLim(100)
	x, y := twoParts(g, lim)
	decide(t, g, takeCall(10, x)) // x: 90 stored

	chain, unblock, chainDone := holdX(t, g, x, y)

	// Five takes of 1, in order, each parked before the next is sent.
	var takes []*Call
	var dones []<-chan struct{}
	for i := 0; i < 5; i++ {
		c := takeCall(1, x)
		takes = append(takes, c)
		dones = append(dones, async(func() { decide(t, g, c) }))
		waitUntil(t, "take to park", func() bool { return parkedOn(t, g, 0, x.ID) == i+1 })
	}
	// A reset and a peek of x park too.
	reset := NewCall()
	reset.AddItem(x, -1, false)
	resetDone := async(func() { g.Reset(reset) })
	waitUntil(t, "reset to park", func() bool { return parkedOn(t, g, 0, x.ID) == 6 })
	if v := value(t, g, x); v != 90 {
		t.Fatalf("held x changed to %v while held", v)
	}
	for _, d := range dones {
		select {
		case <-d:
			t.Fatal("a take on a held bucket finished before the hold's commit")
		default:
		}
	}
	unblock()
	waitChan(t, chainDone, "the chain")
	if !chain.Members[0].OK || !chain.Members[1].OK {
		t.Fatalf("chain denied: %+v", chain.Members)
	}
	for i, d := range dones {
		waitChan(t, d, "a parked take")
		m := takes[i].Members[0]
		if want := float64(89 - 1 - i); !m.OK || m.Left != want {
			t.Errorf("parked take %d: %+v, want OK with %v left (rerun in arrival order)", i, m, want)
		}
	}
	waitChan(t, resetDone, "the parked reset")
	if _, ok := state(t, g, x); ok {
		t.Error("x still stored after the reset that ran last")
	}
	if h, p := holdsAndParked(t, g); h != 0 || p != 0 {
		t.Fatalf("held %d parked %d at the end", h, p)
	}
}

// A hold is released when the last partition denies: the parked messages
// then see the unchanged pre-image.
func TestChainDenialReleasesHolds(t *testing.T) {
	g := newGroup(t, 2, NopLog{}, frozen)
	lim := tokenLim(5)
	x, y := twoParts(g, lim)
	decide(t, g, takeCall(5, y)) // y empty: the chain will be denied

	chain, unblock, chainDone := holdX(t, g, x, y)
	d := takeCall(5, x)
	dDone := async(func() { decide(t, g, d) })
	waitUntil(t, "take to park", func() bool { return parkedOn(t, g, 0, x.ID) == 1 })
	unblock()
	waitChan(t, chainDone, "the chain")
	waitChan(t, dDone, "the parked take")
	if chain.Members[0].OK && chain.Members[1].OK {
		t.Fatalf("chain granted with y empty: %+v", chain.Members)
	}
	if !d.Members[0].OK || d.Members[0].Left != 0 {
		t.Fatalf("parked take after denied chain: %+v, want all 5 granted", d.Members[0])
	}
	if h, p := holdsAndParked(t, g); h != 0 || p != 0 {
		t.Fatalf("held %d parked %d at the end", h, p)
	}
}

// A grant becomes visible to later decisions at once, but the caller hears
// of it only after the log commits it; a chain's callers wait for every
// partition's commit.
func TestChainAcknowledgedOnlyAfterCommit(t *testing.T) {
	fl := &fakeLog{hold: true}
	g := newGroup(t, 2, fl, frozen)
	lim := tokenLim(10)
	x, y := twoParts(g, lim)
	c := takeCall(2, x, y)
	done := async(func() { decide(t, g, c) })
	waitUntil(t, "both partitions to hand their records to the log", func() bool { return fl.held() == 2 })
	select {
	case <-done:
		t.Fatal("chain acknowledged before its commit")
	default:
	}
	// The uncommitted grant is already visible.
	chk := takeCall(9, x)
	chk.Members[0].Op = OpCheck
	decide(t, g, chk)
	if chk.Members[0].OK {
		t.Fatal("a check saw the pre-grant state: a grant must be visible as soon as it is decided")
	}
	chk.Release()
	fl.release(nil)
	waitChan(t, done, "the chain after its commit")
	if c.FirstErr() != nil || !c.Members[0].OK || !c.Members[1].OK {
		t.Fatalf("chain: %+v err %v", c.Members, c.FirstErr())
	}
}

// A failed commit reaches the caller as an item error.
func TestCommitFailureReachesCaller(t *testing.T) {
	boom := errors.New("disk on fire")
	fl := &fakeLog{commit: boom}
	g := newGroup(t, 2, fl, frozen)
	x, y := twoParts(g, tokenLim(10))
	for _, c := range []*Call{takeCall(1, x), takeCall(1, x, y)} {
		decide(t, g, c)
		if !errors.Is(c.FirstErr(), boom) {
			t.Errorf("call over %d items: FirstErr = %v, want %v", len(c.Items), c.FirstErr(), boom)
		}
		c.Release()
	}
}

// The log failing while a chain holds buckets: the last partition aborts,
// every hold is released, the caller gets the log's error, nothing is
// consumed, and later grants fail closed.
func TestLogFailureMidChain(t *testing.T) {
	boom := errors.New("log failed")
	fl := &fakeLog{}
	g := newGroup(t, 2, fl, frozen)
	lim := tokenLim(10)
	x, y := twoParts(g, lim)

	chain, unblock, chainDone := holdX(t, g, x, y)
	d := takeCall(1, x)
	dDone := async(func() { decide(t, g, d) })
	waitUntil(t, "take to park", func() bool { return parkedOn(t, g, 0, x.ID) == 1 })
	fl.setErr(boom)
	unblock()
	waitChan(t, chainDone, "the chain after the log failed")
	waitChan(t, dDone, "the parked take after the log failed")
	if !errors.Is(chain.FirstErr(), boom) {
		t.Errorf("chain FirstErr = %v, want %v", chain.FirstErr(), boom)
	}
	if !errors.Is(d.FirstErr(), boom) {
		t.Errorf("parked take FirstErr = %v, want %v (fail closed)", d.FirstErr(), boom)
	}
	if vx, vy := value(t, g, x), value(t, g, y); vx != 10 || vy != 10 {
		t.Errorf("values after failed chain: x %v y %v, want 10 10", vx, vy)
	}
	if h, p := holdsAndParked(t, g); h != 0 || p != 0 {
		t.Fatalf("held %d parked %d after the log failed", h, p)
	}
}

// The log failing between the last partition's decision and an earlier
// partition's commit: the caller gets the error and no hold is left.
func TestLogFailureBeforeEarlierCommit(t *testing.T) {
	boom := errors.New("log failed")
	fl := &fakeLog{}
	g := newGroup(t, 2, fl, frozen)
	x, y := twoParts(g, tokenLim(10))

	chain, unblock1, chainDone := holdX(t, g, x, y)
	unblock0 := blockPartition(t, g, 0)
	unblock1()
	waitUntil(t, "the commit to reach partition 0", func() bool { return inbox(g.parts[0]) == 1 })
	fl.setErr(boom)
	unblock0()
	waitChan(t, chainDone, "the chain")
	if !errors.Is(chain.FirstErr(), boom) {
		t.Errorf("chain FirstErr = %v, want %v", chain.FirstErr(), boom)
	}
	if h, p := holdsAndParked(t, g); h != 0 || p != 0 {
		t.Fatalf("held %d parked %d", h, p)
	}
	if v := value(t, g, x); v != 10 {
		t.Errorf("x = %v: the failed commit stored it", v)
	}
}

// Exactness and freedom from deadlock: many callers run atomic calls over
// random subsets (in random order, with repeats) of buckets spread over
// the partitions, mixed with single takes, checks, two-choice takes and
// counter reads. Every call ends; with a frozen clock every bucket lost
// exactly what was acknowledged, and no bucket went below zero.
func TestAtomicStressExact(t *testing.T) {
	for _, tc := range []struct {
		name  string
		parts int
		capac float64
	}{
		{"contended", 4, 200},  // many denials
		{"plenty", 3, 1e9},     // nearly all grants
		{"many-parts", 8, 500}, // long chains
	} {
		t.Run(tc.name, func(t *testing.T) {
			atomicStress(t, tc.parts, tc.capac)
		})
	}
}

func atomicStress(t *testing.T, parts int, capac float64) {
	const (
		workers = 48
		iters   = 250
	)
	g := newGroup(t, parts, NopLog{}, frozen)
	lim := tokenLim(capac)
	var items []Item
	for p := int32(0); p < int32(parts); p++ {
		for i := 0; i < 2; i++ {
			items = append(items, itemFor(g, lim, "n", keyOn(g, "n", p, i), 0))
		}
	}
	index := make(map[BucketID]int)
	for i, it := range items {
		index[it.ID] = i
	}
	spent := make([]atomic.Int64, len(items)) // acknowledged tokens per bucket
	var calls, grants atomic.Int64
	done := spawn(workers, 0, 99, func(r *rand.Rand) {
		for i := 0; i < iters; i++ {
			var c *Call
			switch op := r.IntN(10); {
			case op < 6: // atomic over 2..5 buckets, maybe repeated
				n := 2 + r.IntN(4)
				var its []Item
				for range n {
					its = append(its, items[r.IntN(len(items))])
				}
				c = takeCall(float64(1+r.IntN(3)), its...)
			case op < 8:
				c = takeCall(float64(1+r.IntN(3)), items[r.IntN(len(items))])
			case op < 9: // checks across partitions: write nothing
				c = takeCall(1, items[r.IntN(len(items))], items[r.IntN(len(items))])
				for m := range c.Members {
					c.Members[m].Op = OpCheck
				}
			default:
				if r.IntN(4) == 0 {
					g.Counts()
				}
				continue
			}
			decide(t, g, c)
			if err := c.FirstErr(); err != nil {
				t.Errorf("unexpected error: %v", err)
			}
			all := true
			for m := range c.Members {
				all = all && c.Members[m].OK
			}
			calls.Add(1)
			if all && c.Members[0].Op == OpTake {
				grants.Add(1)
				for m := range c.Members {
					mem := &c.Members[m]
					spent[index[c.Items[mem.First].ID]].Add(int64(mem.Count))
				}
			}
			c.Release()
		}
	})
	waitChan(t, done, "every caller (deadlock?)")
	for k, it := range items {
		v := value(t, g, it)
		if v < 0 {
			t.Errorf("bucket %v over-admitted: value %v", it.ID, v)
		}
		if got, want := capac-v, float64(spent[k].Load()); got != want {
			t.Errorf("bucket %v: lost %v tokens, acknowledged %v", it.ID, got, want)
		}
	}
	if h, p := holdsAndParked(t, g); h != 0 || p != 0 {
		t.Errorf("held %d parked %d after every call ended", h, p)
	}
	if n := g.Counts(); n.Grants != uint64(grants.Load()) {
		t.Errorf("Counts().Grants = %d, want %d", n.Grants, grants.Load())
	}
	_ = context.Background
}

// A message that arrives after others have parked on a bucket must not
// overtake them when the hold is released in the same batch: parked
// messages run in arrival order, before newcomers. (A newcomer queued in
// the same batch as the commit that frees the bucket once ran at once,
// before the parked queue, which woke only at the end of the batch: under
// steady contention a parked message could be overtaken batch after batch.)
func TestNewcomerDoesNotOvertakeParked(t *testing.T) {
	g := newGroup(t, 2, NopLog{}, frozen)
	lim := tokenLim(2)
	x, y := twoParts(g, lim)

	chain, unblock1, chainDone := holdX(t, g, x, y) // takes 1 of x's 2
	early := takeCall(1, x)
	earlyDone := async(func() { decide(t, g, early) })
	waitUntil(t, "the early take to park", func() bool { return parkedOn(t, g, 0, x.ID) == 1 })

	unblock0 := blockPartition(t, g, 0)
	unblock1()
	waitUntil(t, "the commit to reach partition 0", func() bool { return inbox(g.parts[0]) == 1 })
	late := takeCall(1, x)
	lateDone := async(func() { decide(t, g, late) })
	waitUntil(t, "the late take to queue behind the commit", func() bool { return inbox(g.parts[0]) == 2 })
	unblock0()
	waitChan(t, chainDone, "the chain")
	waitChan(t, earlyDone, "the early take")
	waitChan(t, lateDone, "the late take")
	if !chain.Members[0].OK {
		t.Fatalf("chain denied: %+v", chain.Members)
	}
	if !early.Members[0].OK || late.Members[0].OK {
		t.Errorf("one token left: early (parked first) OK=%v, late (arrived after) OK=%v; want the early one served",
			early.Members[0].OK, late.Members[0].OK)
	}
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
