package actor

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/seed7fbd42b6/ratelimit/internal/bucket"
)

// hookClock is a settable clock that runs hook (once) on the caller's
// goroutine right after a reading: "someone else ran between this reading
// and what the reader does with it".
type hookClock struct {
	mu   sync.Mutex
	now  int64
	hook func()
}

func (c *hookClock) read() int64 {
	c.mu.Lock()
	v, h := c.now, c.hook
	c.hook = nil
	c.mu.Unlock()
	if h != nil {
		h()
	}
	return v
}

func (c *hookClock) set(now int64) {
	c.mu.Lock()
	c.now = now
	c.mu.Unlock()
}

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
// window, the span touching two windows). Written by a reviewer of
// c3b6688, whose first version over-admitted here (29 and 30 tokens).
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
			clk := &hookClock{now: tc.first}
			g := NewGroup(2, NopLog{}, clk.read) // never started: every span runs inline
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
			clk.set(tc.stale)
			dropped := 0
			clk.hook = func() {
				clk.set(tc.later)
				g.Run(int(y.Part), func(p *Partition) { dropped = p.Sweep(tc.later, nil) })
			}
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

// In memory mode (NopLog) a partition builds no records, and its flush
// returns before clearing them: a reset must not record its deletions
// either, or p.recs would grow by one record (holding the name and key) per
// reset bucket, forever (as it did in c3b6688).
func TestMemoryModeResetKeepsNoRecords(t *testing.T) {
	g := NewGroup(1, NopLog{}, frozen)
	lim := tokenLim(10)
	const keys = 1000
	for i := range keys {
		c := NewCall()
		c.AddItem(itemFor(g, lim, "n", fmt.Sprintf("k%d", i), 0), -1, false)
		g.Reset(c)
		if err := c.FirstErr(); err != nil {
			t.Fatalf("Reset: %v", err)
		}
		c.Release()
	}
	var n int
	g.Run(0, func(p *Partition) { n = len(p.recs) })
	if n != 0 {
		t.Fatalf("%d records kept by a memory-mode partition after %d resets, want 0", n, keys)
	}
}
