package actor

// Visiting a partition's buckets (visit.go): Sweep and SweepSome drop full
// buckets, visit every other exactly once, and keep them reachable.

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/seed7fbd42b6/ratelimit/internal/bucket"
)

// sweepSomePass calls SweepSome with budget until the calls have
// examined as many buckets as the table held at the start (no overflow):
// one pass over every subtable, which must examine each bucket exactly once.
func sweepSomePass(t *testing.T, p *Partition, budget int) (dropped, examined int) {
	t.Helper()
	n0 := p.Len()
	for calls := 0; examined < n0; calls++ {
		if calls > n0+len(p.buckets.dir) {
			t.Fatalf("SweepSome: %d calls examined %d of %d", calls, examined, n0)
		}
		before := p.Len()
		d, e := p.SweepSome(t0, budget)
		if e < min(budget, 1) {
			t.Fatalf("SweepSome(%d) examined %d with %d left to examine", budget, e, n0-examined)
		}
		if p.Len() != before-d {
			t.Fatalf("SweepSome dropped %d, Len went %d -> %d", d, before, p.Len())
		}
		dropped += d
		examined += e
	}
	if examined != n0 {
		t.Fatalf("a pass of SweepSome(%d) examined %d buckets of %d: some twice", budget, examined, n0)
	}
	return dropped, examined
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

// Every bucket full: Sweep drops all, visits none, shrinks every subtable
// to the minimum; the table then regrows to the same size and a cycle of
// SweepSome calls of budget 1 drops all again.
func TestSweepAllFullThenRegrow(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	tb := newTable()
	m := tableModel{}
	const n = 10000
	for k := 0; k < n; k++ {
		modelPut(&tb, m, modelID("f", k), forgeHash(&tb, r.Uint64(), false), 10, false)
	}
	checkTable(t, &tb, m)
	dirLen := len(tb.dir)
	checkSweep(t, &tb, m)
	if len(m) != 0 || tb.len() != 0 {
		t.Fatalf("after sweeping all-full: len %d", tb.len())
	}
	checkTable(t, &tb, m)
	tb.each(0, func(s *subtable, _ int) {
		if len(s.tags) != minSlots || s.n != 0 {
			t.Fatalf("after sweeping all-full: subtable of %d slots, %d entries", len(s.tags), s.n)
		}
	})
	if len(tb.dir) != dirLen {
		t.Fatalf("directory changed from %d to %d", dirLen, len(tb.dir))
	}
	for k := 0; k < n; k += 13 {
		mustMiss(t, &tb, forgeHash(&tb, r.Uint64(), false), modelID("f", k))
	}
	for k := 0; k < n; k++ {
		modelPut(&tb, m, modelID("g", k), forgeHash(&tb, r.Uint64(), k%3 == 0), 10, false)
	}
	checkTable(t, &tb, m)
	p := &Partition{buckets: tb}
	dropped, examined := sweepSomePass(t, p, 1)
	tb = p.buckets
	if dropped != n || examined != n || tb.len() != 0 {
		t.Fatalf("SweepSome cycle over %d full: dropped %d, examined %d, len %d", n, dropped, examined, tb.len())
	}
	for id := range m {
		delete(m, id)
	}
	checkTable(t, &tb, m)
}

// SweepSome with budget 1 steps one non-empty subtable at a time: a pass
// examines every bucket exactly once, drops exactly the full ones, keeps
// the others intact, whatever the cursor's start, at global depth 0 and
// in a directory with subtables of mixed depths.
func TestSweepSomeBudgetOne(t *testing.T) {
	for _, tc := range []struct {
		name   string
		n      int
		prefix int // clustered keys' shared top bits (mixed depths), 0 for none
	}{
		{"depth0-one", 1, 0},
		{"depth0-six", 6, 0},
		{"depth0-grown", 40, 0},
		{"uniform", 8000, 0},
		{"mixed-depths", 7000, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(51, uint64(tc.n)))
			p := newPartition(NopLog{}, frozen)
			tb := &p.buckets
			m := tableModel{}
			for k := 0; k < tc.n; k++ {
				tag := r.Uint64()
				if tc.prefix > 0 && k%2 == 0 {
					tag = forgeTag(r, 0b101, tc.prefix, r.Uint64())
				}
				modelPut(tb, m, modelID("b", k), forgeHash(tb, tag, false), float64(k%11), k%50 == 0)
			}
			if tc.n <= 40 && tb.shift != 64 {
				t.Fatalf("%d keys: global depth %d, want 0", tc.n, 64-tb.shift)
			}
			checkTable(t, tb, m)
			for pass := 0; pass < 3; pass++ {
				full := dropFull(m)
				// Budget 1, then a budget beyond everything: one call, one
				// pass exactly, ending where it started.
				budget, c0 := 1, tb.cursor%len(tb.dir)
				if pass == 2 {
					budget = 1 << 30
				}
				n0 := p.Len()
				dropped, examined := sweepSomePass(t, p, budget)
				if dropped != full || examined != n0 {
					t.Fatalf("pass %d: dropped %d of %d full, examined %d of %d", pass, dropped, full, examined, n0)
				}
				if c := tb.cursor % len(tb.dir); budget > 1 && c != c0 {
					t.Fatalf("a whole pass moved the cursor from %d to %d", c0, c)
				}
				checkTable(t, tb, m)
				// Make some full again, starting the next pass elsewhere.
				for id, v := range m {
					if r.IntN(3) == 0 && !v.unknown {
						modelPut(tb, m, id, v.h, 10, false)
					}
				}
			}
		})
	}
}

// SweepSome's cursor when the directory doubles between calls: it keeps
// pointing at the same place (the same fraction of the directory, on a
// subtable boundary), and every bucket that was full before a pass and is
// not touched is dropped by the end of the pass.
func TestSweepSomeCursorAcrossDoubling(t *testing.T) {
	r := rand.New(rand.NewPCG(61, 62))
	p := newPartition(NopLog{}, frozen)
	tb := &p.buckets
	m := tableModel{}
	k, doublings := 0, 0
	// Clusters of keys sharing ever longer prefixes: each forces splits
	// down to its prefix's depth, doubling the directory several times
	// (some within one put), while SweepSome steps move the cursor.
	for c, bits := range []int{5, 7, 9, 11} {
		prefix := uint64(0b10110011101) >> (11 - bits) // a different region each time
		prefix ^= uint64(c)
		for i := 0; i < 3200; i++ {
			if i%800 == 0 {
				p.SweepSome(t0, 1+r.IntN(2000))
				if err := tableErr(tb, pruneSwept(t, tb, m)); err != nil {
					t.Fatalf("cluster %d, after %d: %v", c, i, err)
				}
			}
			before, dirBefore := tb.cursor, len(tb.dir)
			modelPut(tb, m, modelID("c", k), forgeHash(tb, forgeTag(r, prefix, bits, r.Uint64()), false), float64(r.IntN(11)), false)
			k++
			if len(tb.dir) > dirBefore {
				doublings++
			}
			if tb.cursor*dirBefore != before*len(tb.dir) {
				t.Fatalf("directory %d -> %d moved the cursor %d -> %d", dirBefore, len(tb.dir), before, tb.cursor)
			}
		}
	}
	if doublings < 3 || len(tb.dir) < 1<<10 {
		t.Fatalf("the directory doubled %d times (to %d); the test needs more", doublings, len(tb.dir))
	}
	pruneSwept(t, tb, m)
	// Now a full pass from wherever the cursor is drops every full bucket.
	full := dropFull(m)
	n0 := p.Len()
	dropped, examined := sweepSomePass(t, p, 1+r.IntN(3000))
	if dropped != full || examined != n0 {
		t.Fatalf("final pass: dropped %d of %d full, examined %d of %d", dropped, full, examined, n0)
	}
	checkTable(t, tb, m)
}

// Sweep with overflow entries around, where every bucket is full or only
// the main entries or only the overflow entries are: whatever is not full
// survives, reachable through its own hash, and each is visited once.
func TestSweepOverflowPatterns(t *testing.T) {
	for _, pattern := range []string{"all-full", "main-full", "overflow-full", "alternate", "none"} {
		t.Run(pattern, func(t *testing.T) {
			r := rand.New(rand.NewPCG(81, 82))
			tb := newTable()
			m := tableModel{}
			for g := 0; g < 200; g++ {
				tag := r.Uint64() | 1
				for i := 0; i < 4; i++ {
					h := forgeHash(&tb, tag, i%2 == 1)
					v := 3.0
					switch {
					case pattern == "all-full",
						pattern == "main-full" && i == 0,
						pattern == "overflow-full" && i > 0,
						pattern == "alternate" && (g+i)%2 == 0:
						v = 10
					}
					modelPut(&tb, m, BucketID{Name: "m", Key: fmt.Sprintf("p%d", g), Shard: uint32(i)}, h, v, false)
				}
			}
			for k := 0; k < 3300; k++ { // with the 800 above: a split
				modelPut(&tb, m, modelID("q", k), forgeHash(&tb, r.Uint64(), false), float64(k%11), false)
			}
			checkTable(t, &tb, m)
			if len(tb.overflow) != 600 {
				t.Fatalf("overflow holds %d, want 600", len(tb.overflow))
			}
			checkSweep(t, &tb, m)
			checkTable(t, &tb, m)
			checkSweep(t, &tb, m) // nothing left to drop
			checkTable(t, &tb, m)
		})
	}
}

// SweepSome with overflow entries around sweeps everything (to keep
// promotion exact) and reports how many buckets it examined: all it held.
func TestSweepSomeOverflowReportsExamined(t *testing.T) {
	p := newPartition(NopLog{}, frozen)
	tb := &p.buckets
	m := tableModel{}
	h, ids := collidingIDs(3)
	for _, id := range ids {
		modelPut(tb, m, id, h, 10, false) // all full
	}
	modelPut(tb, m, modelID("z", 0), forgeHash(tb, 12345, false), 4, false)
	before := p.Len()
	dropped, examined := p.SweepSome(t0, 1)
	if dropped != 3 || p.Len() != 1 {
		t.Fatalf("dropped %d, Len %d; want 3, 1", dropped, p.Len())
	}
	if examined != before {
		t.Errorf("SweepSome examined all %d buckets (Sweep), reports %d", before, examined)
	}
}
