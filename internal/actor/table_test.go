package actor

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/seed7fbd42b6/ratelimit/internal/bucket"
	"github.com/seed7fbd42b6/ratelimit/internal/wal"
)

// collidingIDs are n distinct bucket ids given one shared table hash h
// (a real 64-bit collision cannot be found, so the test forges one).
func collidingIDs(n int) (h uint64, ids []BucketID) {
	for i := 0; i < n; i++ {
		ids = append(ids, BucketID{Name: "n", Key: fmt.Sprintf("c%d", i)})
	}
	return 0xC011_1DE5_C011_1DE5, ids
}

func st(v float64) bucket.State { return bucket.State{Value: v, TS: t0} }

func mustGet(t *testing.T, tb *table, h uint64, id BucketID, want float64) {
	t.Helper()
	e, ok := tb.get(h, id)
	if !ok {
		t.Fatalf("get(%v): missing, want value %v", id, want)
	}
	if e.id != id || e.s.Value != want {
		t.Fatalf("get(%v) = %+v, want value %v", id, e, want)
	}
}

func mustMiss(t *testing.T, tb *table, h uint64, id BucketID) {
	t.Helper()
	if e, ok := tb.get(h, id); ok {
		t.Fatalf("get(%v) = %+v, want missing", id, e)
	}
}

func TestTableCollisionsKeptExactly(t *testing.T) {
	lim := tokenLim(10)
	h, ids := collidingIDs(4)
	tb := newTable()
	for i, id := range ids {
		mustMiss(t, &tb, h, id)
		tb.put(h, entry{id: id, s: st(float64(i)), lim: lim})
	}
	if tb.len() != 4 {
		t.Fatalf("len = %d, want 4", tb.len())
	}
	for i, id := range ids {
		mustGet(t, &tb, h, id, float64(i))
	}
	// Updates land on the right entry, in main or overflow.
	for i, id := range ids {
		tb.put(h, entry{id: id, s: st(float64(10 + i)), lim: lim})
	}
	if tb.len() != 4 {
		t.Fatalf("len after updates = %d, want 4", tb.len())
	}
	for i, id := range ids {
		mustGet(t, &tb, h, id, float64(10+i))
	}
	// An id that is neither stored nor the main entry is missing.
	mustMiss(t, &tb, h, BucketID{Name: "n", Key: "absent"})
	// Deleting an overflow id leaves the rest.
	tb.del(h, ids[2])
	mustMiss(t, &tb, h, ids[2])
	for _, i := range []int{0, 1, 3} {
		mustGet(t, &tb, h, ids[i], float64(10+i))
	}
	// Deleting an absent colliding id changes nothing.
	tb.del(h, BucketID{Name: "n", Key: "absent"})
	if tb.len() != 3 {
		t.Fatalf("len = %d, want 3", tb.len())
	}
}

// Deleting the main entry of a colliding hash must keep every overflow
// entry reachable (promotion). The table is keyed by the hash its callers
// pass (Item.Hash, Restore's h); del's promotion instead recomputes
// bucket.ShardHash(bucket.Hash(Name, Key), Shard) of each overflow id, so an
// entry whose caller-supplied hash is not that recomputation is never
// promoted and becomes unreachable (get misses it, so its bucket reads as
// full: over-admission), while a stale copy lingers in overflow.
func TestTableDeleteMainPromotesOverflow(t *testing.T) {
	lim := tokenLim(10)
	h, ids := collidingIDs(3)
	tb := newTable()
	for i, id := range ids {
		tb.put(h, entry{id: id, s: st(float64(i)), lim: lim})
	}
	tb.del(h, ids[0])
	mustMiss(t, &tb, h, ids[0])
	mustGet(t, &tb, h, ids[1], 1)
	mustGet(t, &tb, h, ids[2], 2)
	tb.del(h, ids[1])
	mustGet(t, &tb, h, ids[2], 2)
	tb.del(h, ids[2])
	if tb.len() != 0 {
		t.Fatalf("len = %d after deleting everything, want 0 (overflow %v)", tb.len(), tb.overflow)
	}
}

// The same through the partitions: two buckets on one partition whose
// Items carry the same Hash. Resetting one must not lose the other's debt.
func TestCollidingItemsThroughGroup(t *testing.T) {
	g := newGroup(t, 2, NopLog{}, frozen)
	lim := tokenLim(10)
	a := itemFor(g, lim, "n", "a", 0)
	b := a
	b.ID.Key = "b-forged-collision" // same Hash and Part, different id

	for _, it := range []Item{a, b} {
		c := takeCall(3, it)
		decide(t, g, c)
		if !c.Members[0].OK || c.Members[0].Left != 7 {
			t.Fatalf("first take on %v: %+v, want 7 left", it.ID, c.Members[0])
		}
		c.Release()
	}
	// One atomic call over both: each sees its own state.
	c := takeCall(1, a, b)
	decide(t, g, c)
	if c.Members[0].Left != 6 || c.Members[1].Left != 6 {
		t.Fatalf("atomic take over colliding buckets: %+v", c.Members)
	}
	c.Release()

	r := NewCall()
	r.AddItem(a, -1, false)
	g.Reset(r)
	r.Release()
	if v := value(t, g, a); v != 10 {
		t.Fatalf("a after reset = %v, want 10", v)
	}
	if v := value(t, g, b); v != 6 {
		t.Fatalf("b after resetting a = %v, want 6 (b's state lost: its tokens are minted again)", v)
	}
}

// Sweep drops full buckets and visits every other bucket exactly once,
// in main and overflow alike, and leaves the survivors reachable.
func TestSweepOverCollisions(t *testing.T) {
	lim := tokenLim(10)
	for _, tc := range []struct {
		name string
		vals []float64 // per colliding id, in insertion order (first is main)
	}{
		{"main-full", []float64{10, 3}},
		{"overflow-full", []float64{3, 10}},
		{"all-full", []float64{10, 10, 10}},
		{"none-full", []float64{1, 2, 3}},
		{"main-full-many", []float64{10, 1, 10, 2, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, ids := collidingIDs(len(tc.vals))
			p := newPartition(NopLog{}, frozen)
			for i, id := range ids {
				p.buckets.put(h, entry{id: id, s: st(tc.vals[i]), lim: lim})
			}
			// A non-colliding neighbour that is not full.
			other := BucketID{Name: "n", Key: "other"}
			p.buckets.put(bucket.ShardHash(bucket.Hash(other.Name, other.Key), 0), entry{id: other, s: st(4), lim: lim})
			seen := map[BucketID]int{}
			dropped := p.Sweep(t0, func(id BucketID, s bucket.State) { seen[id]++ })
			wantDropped := 0
			for i, id := range ids {
				if tc.vals[i] >= 10 {
					wantDropped++
					if seen[id] != 0 {
						t.Errorf("full %v visited", id)
					}
					mustMiss(t, &p.buckets, h, id)
					continue
				}
				if seen[id] != 1 {
					t.Errorf("%v visited %d times, want 1", id, seen[id])
				}
				mustGet(t, &p.buckets, h, id, tc.vals[i])
			}
			if seen[other] != 1 {
				t.Errorf("neighbour visited %d times", seen[other])
			}
			if dropped != wantDropped {
				t.Errorf("dropped %d, want %d", dropped, wantDropped)
			}
			if p.Len() != len(ids)-wantDropped+1 {
				t.Errorf("Len = %d, want %d", p.Len(), len(ids)-wantDropped+1)
			}
		})
	}
}

// Restore and later decisions agree on where a bucket is, and a restored
// deletion removes it.
func TestRestoreThenDecide(t *testing.T) {
	lim := tokenLim(10)
	g := testGroup(3, NopLog{}, frozen)
	x := itemFor(g, lim, "n", "x", 2)
	g.Restore(x.ID, bucket.Hash("n", "x"), st(4), lim, false)
	y := itemFor(g, lim, "n", "y", 0)
	g.Restore(y.ID, bucket.Hash("n", "y"), st(4), lim, false)
	g.Restore(y.ID, bucket.Hash("n", "y"), bucket.State{}, nil, true)
	g.Start()
	t.Cleanup(g.Stop)
	c := takeCall(1, x, y)
	decide(t, g, c)
	if c.Members[0].Left != 3 || c.Members[1].Left != 9 {
		t.Fatalf("after restore: %+v, want x 3 left, y 9 left", c.Members)
	}
	c.Release()
}

// The table against a Go map, through enough keys to split subtables and
// double the directory several times, with deletions (backward shifts),
// updates, sweeps (shrinks) and re-insertions.
func TestTableMatchesMap(t *testing.T) {
	lim := tokenLim(10)
	rng := rand.New(rand.NewPCG(1, 2))
	tb := newTable()
	model := map[BucketID]float64{}
	const keys = 40_000 // ~13 full subtables
	id := func(k int) (uint64, BucketID) {
		b := BucketID{Name: "n", Key: "k" + strconv.Itoa(k)}
		return bucket.ShardHash(bucket.Hash(b.Name, b.Key), 0), b
	}
	check := func(when string) {
		t.Helper()
		if tb.len() != len(model) {
			t.Fatalf("%s: len %d, model %d", when, tb.len(), len(model))
		}
		for k := 0; k < keys; k += 7 {
			h, b := id(k)
			e, ok := tb.get(h, b)
			v, want := model[b]
			if ok != want || ok && (e.s.Value != v || e.id != b) {
				t.Fatalf("%s: get(%v) = %+v %v, model %v %v", when, b, e, ok, v, want)
			}
		}
	}
	for round := 0; round < 4; round++ {
		for i := 0; i < 3*keys; i++ {
			k := rng.IntN(keys)
			h, b := id(k)
			switch rng.IntN(3) {
			case 0, 1:
				v := float64(rng.IntN(10)) // 0..9: never full
				tb.put(h, entry{id: b, s: st(v), lim: lim})
				model[b] = v
			case 2:
				tb.del(h, b)
				delete(model, b)
			}
		}
		check("after churn")
		if round%2 == 1 {
			// Make every other bucket full, sweep, and expect exactly those gone.
			p := &Partition{buckets: tb}
			for b := range model {
				if len(b.Key)%2 == 0 {
					h := bucket.ShardHash(bucket.Hash(b.Name, b.Key), 0)
					p.buckets.put(h, entry{id: b, s: st(10), lim: lim})
					delete(model, b)
				}
			}
			seen := map[BucketID]int{}
			p.Sweep(t0, func(b BucketID, s bucket.State) { seen[b]++ })
			tb = p.buckets
			for b := range model {
				if seen[b] != 1 {
					t.Fatalf("%v visited %d times, want once", b, seen[b])
				}
			}
			if len(seen) != len(model) {
				t.Fatalf("visited %d buckets, want %d", len(seen), len(model))
			}
			check("after sweep")
		}
	}
	if len(tb.dir) < 4 {
		t.Fatalf("directory of %d: the test did not split subtables", len(tb.dir))
	}
	// Deleting everything shrinks every subtable back to its minimum.
	for b := range model {
		tb.del(bucket.ShardHash(bucket.Hash(b.Name, b.Key), 0), b)
		delete(model, b)
	}
	p := &Partition{buckets: tb}
	p.Sweep(t0, nil)
	tb.each(0, func(s *subtable, _ int) {
		if s.n != 0 || len(s.tags) != minSlots {
			t.Fatalf("after deleting all: subtable of %d entries, %d slots", s.n, len(s.tags))
		}
	})
	check("empty")
}

// Repeated SweepSome calls with a small budget drop every full bucket and
// keep the others, in about len/budget calls.
func TestSweepSomeCoversEverything(t *testing.T) {
	lim := tokenLim(10)
	p := newPartition(NopLog{}, frozen)
	const n = 30_000
	for k := 0; k < n; k++ {
		b := BucketID{Name: "n", Key: "k" + strconv.Itoa(k)}
		v := 3.0
		if k%3 == 0 {
			v = 10 // full
		}
		p.buckets.put(bucket.ShardHash(bucket.Hash(b.Name, b.Key), 0), entry{id: b, s: st(v), lim: lim})
	}
	dropped, calls := 0, 0
	for examined := 0; examined < n; calls++ {
		d, e := p.SweepSome(t0, 4096)
		if e == 0 {
			t.Fatal("SweepSome examined nothing")
		}
		dropped += d
		examined += e
	}
	if dropped != n/3 {
		t.Fatalf("dropped %d over %d calls, want %d", dropped, calls, n/3)
	}
	if p.Len() != n-n/3 {
		t.Fatalf("Len = %d, want %d", p.Len(), n-n/3)
	}
	if calls > n/4096+2 {
		t.Fatalf("%d calls to cover %d buckets with budget 4096", calls, n)
	}
}

// Two tables place the same keys differently (a random seed each), so
// keys cannot be chosen offline to pile into one probe run.
func TestTableSeedDiffers(t *testing.T) {
	a, b := newTable(), newTable()
	if a.seed == b.seed || a.tag(42) == b.tag(42) {
		t.Fatalf("tables share seed %x", a.seed)
	}
}

// SweepSome interleaved with inserts, updates and deletions (so subtables
// split, shrink and the directory doubles between calls) drops exactly the
// full buckets it examines and never loses or alters another.
func TestSweepSomeInterleavedWithChurn(t *testing.T) {
	lim := tokenLim(10)
	rng := rand.New(rand.NewPCG(3, 4))
	p := newPartition(NopLog{}, frozen)
	model := map[BucketID]float64{}
	const keys = 30_000
	id := func(k int) (uint64, BucketID) {
		b := BucketID{Name: "n", Key: "k" + strconv.Itoa(k)}
		return bucket.ShardHash(bucket.Hash(b.Name, b.Key), 0), b
	}
	for round := 0; round < 200; round++ {
		for i := 0; i < 500; i++ {
			h, b := id(rng.IntN(keys))
			switch rng.IntN(4) {
			case 0, 1:
				v := float64(rng.IntN(11)) // 10 is full
				p.buckets.put(h, entry{id: b, s: st(v), lim: lim})
				model[b] = v
			case 2:
				p.buckets.del(h, b)
				delete(model, b)
			case 3:
				e, ok := p.buckets.get(h, b)
				v, want := model[b]
				if ok != want || ok && e.s.Value != v {
					t.Fatalf("round %d: get(%v) = %v %v, model %v %v", round, b, e.s.Value, ok, v, want)
				}
			}
		}
		before := p.Len()
		dropped, examined := p.SweepSome(t0, 1+rng.IntN(8192))
		if examined == 0 && before > 0 {
			t.Fatalf("round %d: SweepSome examined nothing of %d", round, before)
		}
		if p.Len() != before-dropped {
			t.Fatalf("round %d: Len %d after dropping %d of %d", round, p.Len(), dropped, before)
		}
		// Whatever was dropped was full; whatever is left is intact.
		for b, v := range model {
			h := bucket.ShardHash(bucket.Hash(b.Name, b.Key), 0)
			e, ok := p.buckets.get(h, b)
			switch {
			case !ok && v < 10:
				t.Fatalf("round %d: %v (value %v, not full) lost", round, b, v)
			case !ok:
				delete(model, b) // dropped as full: equal to absent
			case e.s.Value != v:
				t.Fatalf("round %d: %v = %v, want %v", round, b, e.s.Value, v)
			}
		}
		if p.Len() != len(model) {
			t.Fatalf("round %d: Len %d, model %d", round, p.Len(), len(model))
		}
	}
}

// A bucket written several times in one batch leaves one record, holding
// its last state (records are absolute states: replay needs only the
// last), and the others keep theirs.
func TestBatchRecordsCoalescePerBucket(t *testing.T) {
	log := &fakeLog{}
	g := newGroup(t, 1, log, frozen)
	lim := tokenLim(10)
	a, b := itemFor(g, lim, "n", "a", 0), itemFor(g, lim, "n", "b", 0)
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
