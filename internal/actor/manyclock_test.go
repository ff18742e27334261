package actor

import (
	"sync/atomic"
	"testing"
	"time"
)

// The spans of an independent call (LimitMany) that its caller runs itself
// are decided at one clock reading, taken once for the call: a clock read
// costs about as much as a decision on this VM, and a call spans about one
// partition per four requests. With a clock that moves a second per
// reading, one reading per span would store four different times.
func TestManySpansShareOneClockReading(t *testing.T) {
	var reads atomic.Int64
	clock := func() int64 { return t0 + reads.Add(1)*int64(time.Second) }
	const n = 4
	g := NewGroup(n, NopLog{}, clock) // never started: every span runs inline
	lim := tokenLim(10)
	items := make([]Item, n)
	for p := range items {
		items[p] = itemFor(g, lim, "n", keyOn(g, "n", int32(p), 0), 0)
	}
	c := takeCall(1, items...)
	c.Atomic = false
	decide(t, g, c)
	if got := reads.Load(); got != 1 {
		t.Errorf("%d clock readings for one call over %d partitions, want 1", got, n)
	}
	var ts []int64
	for _, it := range items {
		g.Run(int(it.Part), func(p *Partition) {
			e, ok := p.buckets.get(it.Hash, it.ID)
			if !ok {
				t.Fatalf("%s: not stored after a take", it.ID.Key)
			}
			ts = append(ts, e.s.TS)
		})
	}
	for i := range ts {
		if ts[i] != ts[0] {
			t.Fatalf("stored times %v, want one time for the whole call", ts)
		}
	}
}
