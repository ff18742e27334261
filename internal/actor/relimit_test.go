package actor

import (
	"testing"

	"github.com/seed7fbd42b6/ratelimit/internal/bucket"
)

// A call decided under limits that a Relimit replaced before it stores
// (queued behind the Relimit) keeps its bucket under the new limit, so
// that sweeps judge the bucket by the new capacity; a call of the new
// generation stores its own.
func TestRelimitReachesCallsOfAnOlderGeneration(t *testing.T) {
	g := newGroup(t, 1, NopLog{}, frozen)
	old, cur := tokenLim(10), tokenLim(20)
	it := itemFor(g, old, "n", keyOn(g, "n", 0, 0), 0)
	decide(t, g, takeCall(5, it)) // generation 0
	lim := func() *bucket.Limit {
		var e entry
		g.Run(0, func(p *Partition) { e, _ = p.buckets.get(it.Hash, it.ID) })
		return e.lim
	}
	unblock := blockPartition(t, g, 0)
	relimited := async(func() {
		g.Run(0, func(p *Partition) {
			p.Relimit(1, func(BucketID, *bucket.Limit) *bucket.Limit { return cur }, func(BucketID) *bucket.Limit { return cur })
		})
	})
	waitUntil(t, "the Relimit to queue", func() bool { return inbox(g.parts[0]) == 1 })
	taken := async(func() { decide(t, g, takeCall(1, it)) }) // still generation 0
	waitUntil(t, "the take to queue behind it", func() bool { return inbox(g.parts[0]) == 2 })
	unblock()
	waitChan(t, relimited, "the Relimit")
	waitChan(t, taken, "the take")
	if got := lim(); got != cur {
		t.Fatalf("after a take decided under the old limit: the bucket's limit has capacity %v, want the new one's %v", got.Capacity, cur.Capacity)
	}
	now := it
	now.Lim, now.Gen = tokenLim(30), 1
	decide(t, g, takeCall(1, now))
	if got := lim(); got != now.Lim {
		t.Fatalf("after a take of the new generation: capacity %v, want %v", got.Capacity, now.Lim.Capacity)
	}
}

// A call of an older generation that leaves its bucket full under its own
// limit stores it under the new one, where it may not be full: it is kept,
// not dropped (a dropped bucket reads as full under the new capacity).
func TestRelimitKeepsABucketFullOnlyUnderTheOldLimit(t *testing.T) {
	g := newGroup(t, 1, NopLog{}, frozen)
	old, cur := tokenLim(10), tokenLim(20)
	it := itemFor(g, old, "n", keyOn(g, "n", 0, 0), 0)
	decide(t, g, takeCall(5, it)) // generation 0: 5 left
	unblock := blockPartition(t, g, 0)
	relimited := async(func() {
		g.Run(0, func(p *Partition) {
			p.Relimit(1, func(BucketID, *bucket.Limit) *bucket.Limit { return cur }, func(BucketID) *bucket.Limit { return cur })
		})
	})
	waitUntil(t, "the Relimit to queue", func() bool { return inbox(g.parts[0]) == 1 })
	credited := async(func() {
		c := takeCall(5, it) // still generation 0: 10 of 10, full under the old limit
		c.Members[0].Op = OpCredit
		decide(t, g, c)
	})
	waitUntil(t, "the credit to queue behind it", func() bool { return inbox(g.parts[0]) == 2 })
	unblock()
	waitChan(t, relimited, "the Relimit")
	waitChan(t, credited, "the credit")
	s, ok := state(t, g, it)
	if !ok || s.Value != 10 {
		t.Fatalf("after the credit: bucket %+v present %v, want 10 tokens kept (of the new 20)", s, ok)
	}
}
