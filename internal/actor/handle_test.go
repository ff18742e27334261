package actor

// A partition's handling of messages (handle.go): the records a batch hands
// to the log, and the bound on buckets.

import (
	"errors"
	"fmt"
	"testing"

	"github.com/seed7fbd42b6/ratelimit/internal/wal"
)

// A bucket written several times in one batch leaves one record, holding
// its last state (records are absolute states: replay needs only the
// last), and the others keep theirs.
func TestBatchRecordsCoalescePerBucket(t *testing.T) {
	log := &fakeLog{}
	g := newGroup(t, 1, log, frozen)
	lim := tokenLim(10)
	a, b := itemFor(g, lim, "n", "a", 0), itemFor(g, lim, "n", "b", 0)
	// The table hash is seeded per process, so two keys share a record
	// slot once in 256 runs; that case is TestBatchRecordsSlotCollisions.
	b.Hash = a.Hash + 1
	c := NewCall() // independent members, one message: one batch
	for _, it := range []Item{a, b, a, a, b, a, a} {
		m := int32(len(c.Members))
		i := c.AddItem(it, m, false)
		c.Members = append(c.Members, Member{Op: OpTake, Count: 1, First: i, Second: -1})
	}
	decide(t, g, c)
	for i := range c.Members {
		if !c.Members[i].OK {
			t.Fatalf("member %d denied", i)
		}
	}
	c.Release()
	log.mu.Lock()
	recs := append([]wal.Record(nil), log.recs...)
	log.mu.Unlock()
	if len(recs) != 2 {
		t.Fatalf("%d records, want 2 (one per bucket): %+v", len(recs), recs)
	}
	if recs[0].Key != "a" || recs[0].Value != 5 || recs[1].Key != "b" || recs[1].Value != 8 {
		t.Fatalf("records %+v, want a=5 then b=8", recs)
	}
	if va, vb := value(t, g, a), value(t, g, b); va != 5 || vb != 8 {
		t.Fatalf("states a=%v b=%v, want 5 and 8", va, vb)
	}
}

// Buckets whose hashes share a record slot, written alternately in one
// batch and again in a second batch (stale slots), still leave, per batch,
// each bucket's last state as its last record.
func TestBatchRecordsSlotCollisions(t *testing.T) {
	log := &fakeLog{}
	g := newGroup(t, 1, log, frozen)
	lim := tokenLim(10)
	a, b := itemFor(g, lim, "n", "a", 0), itemFor(g, lim, "n", "b", 0)
	b.Hash = a.Hash + 256 // same slot (hash mod 256), different table key
	run := func(items ...Item) []wal.Record {
		t.Helper()
		log.mu.Lock()
		log.recs = nil
		log.mu.Unlock()
		c := NewCall()
		for _, it := range items {
			m := int32(len(c.Members))
			i := c.AddItem(it, m, false)
			c.Members = append(c.Members, Member{Op: OpTake, Count: 1, First: i, Second: -1})
		}
		decide(t, g, c)
		c.Release()
		log.mu.Lock()
		defer log.mu.Unlock()
		return append([]wal.Record(nil), log.recs...)
	}
	last := func(recs []wal.Record, key string) float64 {
		v := -1.0
		for _, r := range recs {
			if r.Key == key {
				v = r.Value
			}
		}
		return v
	}
	recs := run(a, b, a, b, a)
	if va, vb := last(recs, "a"), last(recs, "b"); va != 7 || vb != 8 {
		t.Fatalf("batch 1: last records a=%v b=%v, want 7 and 8: %+v", va, vb, recs)
	}
	recs = run(b, a, b)
	if va, vb := last(recs, "a"), last(recs, "b"); va != 6 || vb != 6 {
		t.Fatalf("batch 2: last records a=%v b=%v, want 6 and 6: %+v", va, vb, recs)
	}
	if va, vb := value(t, g, a), value(t, g, b); va != 6 || vb != 6 {
		t.Fatalf("states a=%v b=%v, want 6 and 6", va, vb)
	}
}

// In memory mode (NopLog) a partition builds no records, and its flush
// returns before clearing them: a reset must not record its deletions
// either, or p.recs would grow by one record (holding the name and key) per
// reset bucket, forever.
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

// New buckets that a two-phase call holds count against its partition's
// most buckets until the commit: a message that needs another new bucket
// there meanwhile is refused, on the atomic path and the single one, so
// the commit cannot take the partition past its bound.
func TestHeldNewBucketsCountAgainstTheBound(t *testing.T) {
	g := testGroup(2, NopLog{}, frozen)
	g.SetMaxBuckets(2) // one bucket a partition
	g.Start()
	t.Cleanup(g.Stop)
	lim := tokenLim(10)
	x, y := twoParts(g, lim)
	z := itemFor(g, lim, "n", keyOn(g, "n", 0, 1), 0) // another key on x's partition

	unblock := blockPartition(t, g, 1)
	defer unblock()
	c := takeCall(1, x, y)
	done := async(func() { decide(t, g, c) })
	waitUntil(t, "the chain to hold x and reach partition 1", func() bool { return inbox(g.parts[1]) == 1 })

	atomic := takeCall(1, z)
	decide(t, g, atomic)
	if err := atomic.FirstErr(); !errors.Is(err, ErrFull) {
		t.Errorf("an atomic take of a new bucket while x is held new: %v, want ErrFull", err)
	}
	atomic.Release()
	single := NewCall()
	i := single.AddItem(z, 0, false)
	single.Members = append(single.Members, Member{Op: OpTake, Count: 1, First: i, Second: -1})
	decide(t, g, single)
	if err := single.FirstErr(); !errors.Is(err, ErrFull) {
		t.Errorf("a single take of a new bucket while x is held new: %v, want ErrFull", err)
	}
	single.Release()

	unblock()
	waitChan(t, done, "the chain's caller")
	if err := c.FirstErr(); err != nil || !c.Members[0].OK || !c.Members[1].OK {
		t.Fatalf("the chain: %v, members %+v", err, c.Members)
	}
	c.Release()
	var held, heldNew int
	g.Run(0, func(p *Partition) { held, heldNew = p.buckets.len(), p.heldNew })
	if held != 1 || heldNew != 0 {
		t.Fatalf("partition 0 holds %d buckets (%d held new), want its bound 1 (0)", held, heldNew)
	}
}
