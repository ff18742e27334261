package actor

// The bucket table (table.go): an extendible-hash directory of subtables
// with linear probing, backward-shift deletion and an overflow map for
// colliding tags. Most tests forge keys (forgeHash) to choose every
// entry's tag exactly, whatever the table's random seed, and compare the
// table with an independent model (checkTable).

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/seed7fbd42b6/ratelimit/internal/bucket"
)

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

// Two tables place the same keys differently (a random seed each), so
// keys cannot be chosen offline to pile into one probe run.
func TestTableSeedDiffers(t *testing.T) {
	a, b := newTable(), newTable()
	if a.seed == b.seed || a.tag(42) == b.tag(42) {
		t.Fatalf("tables share seed %x", a.seed)
	}
}

// The forging helper itself: the tests below mean nothing without it.
func TestForgedHashes(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for _, seed := range []uint64{0, 1, 0xdeadbeef, r.Uint64()} {
		tb := newTable()
		tb.seed = seed
		for i := 0; i < 1000; i++ {
			tag := r.Uint64() | 1
			h, h2 := forgeHash(&tb, tag, false), forgeHash(&tb, tag, true)
			if h == h2 || tb.tag(h) != tag || tb.tag(h2) != tag {
				t.Fatalf("seed %x tag %x: hashes %x %x have tags %x %x", seed, tag, h, h2, tb.tag(h), tb.tag(h2))
			}
		}
	}
}

// subtableOf is a subtable of the given size holding tags, inserted in order,
// the entry of tags[k] holding the value k.
func subtableOf(size int, tags []uint64) *subtable {
	s := newSubtable(0, size)
	for k, tg := range tags {
		s.insert(tg, &entry{s: st(float64(k))})
	}
	return s
}

// checkSubtable checks that s holds exactly the tags[k] with present[k], each
// with its own entry (value k), each reachable from its home (no empty
// slot between) and found by lookup, and that the absent ones are missing.
func checkSubtable(s *subtable, tags []uint64, present []bool) error {
	mask := len(s.tags) - 1
	cnt, want := 0, 0
	for _, ok := range present {
		if ok {
			want++
		}
	}
	for i, tg := range s.tags {
		if tg == 0 {
			if s.ents[i] != (entry{}) {
				return fmt.Errorf("empty slot %d holds %+v", i, s.ents[i])
			}
			continue
		}
		cnt++
		k := int(s.ents[i].s.Value)
		if k < 0 || k >= len(tags) || tags[k] != tg || !present[k] {
			return fmt.Errorf("slot %d: tag %x with the entry of #%d", i, tg, k)
		}
		for p := s.home(tg); p != i; p = (p + 1) & mask {
			if s.tags[p] == 0 {
				return fmt.Errorf("tag %x at %d unreachable from home %d: slot %d empty", tg, i, s.home(tg), p)
			}
		}
	}
	if cnt != want || s.n != cnt {
		return fmt.Errorf("holds %d (n %d), want %d", cnt, s.n, want)
	}
	for k, tg := range tags {
		i, ok := s.lookup(tg)
		if ok != present[k] || ok && int(s.ents[i].s.Value) != k {
			return fmt.Errorf("lookup(#%d) = slot %d %v, want %v", k, i, ok, present[k])
		}
	}
	return nil
}

// tagsWithHomes are distinct tags with the given homes (distinct high bits).
func tagsWithHomes(homes []int) []uint64 {
	tags := make([]uint64, len(homes))
	for k, h := range homes {
		tags[k] = uint64(k+1)<<40 | uint64(h)<<1 | 1
	}
	return tags
}

func allTrue(n int) []bool {
	p := make([]bool, n)
	for k := range p {
		p[k] = true
	}
	return p
}

// Backward-shift deletion, exhaustively: every sequence of five homes in
// an 8-slot subtable (every shape of run, wrapped or not), deleting each
// entry in turn (and inserting one again), against the set of tags.
func TestBackwardShiftExhaustive(t *testing.T) {
	const size, n = 8, 5
	homes := make([]int, n)
	for code := 0; code < 1<<(3*n); code++ {
		for k := range homes {
			homes[k] = code >> (3 * k) & 7
		}
		tags := tagsWithHomes(homes)
		orig := subtableOf(size, tags)
		for del := 0; del < n; del++ {
			s := &subtable{n: orig.n, tags: append([]uint64(nil), orig.tags...), ents: append([]entry(nil), orig.ents...)}
			present := allTrue(n)
			i, ok := s.lookup(tags[del])
			if !ok {
				t.Fatalf("homes %v: tag %d not found", homes, del)
			}
			s.removeAt(i)
			present[del] = false
			if err := checkSubtable(s, tags, present); err != nil {
				t.Fatalf("homes %v, after deleting #%d (slot %d): %v", homes, del, i, err)
			}
			if del == code%n { // and insert it again, once per shape
				s.insert(tags[del], &entry{s: st(float64(del))})
				present[del] = true
				if err := checkSubtable(s, tags, present); err != nil {
					t.Fatalf("homes %v, after reinserting #%d: %v", homes, del, err)
				}
			}
		}
	}
}

// Deletion at the slot just before a run that wraps around the end of the
// subtable, spelled out (e.g. homes 5,6,6,7,0 fill slots 5,6,7,0,1;
// deleting slot 5 or 6 must pull the wrapped entries back across the end,
// no further than their homes).
func TestDeleteBeforeWrappedRun(t *testing.T) {
	for _, tc := range []struct {
		homes []int
		del   int // index into homes
	}{
		{[]int{5, 6, 6, 7, 0}, 0},
		{[]int{5, 6, 6, 7, 0}, 1},
		{[]int{6, 6, 6, 6, 6, 6}, 0},
		{[]int{7, 7, 7, 7, 7, 7}, 0},
		{[]int{7, 7, 7, 7, 7, 7}, 5},
		{[]int{7, 0, 7, 1, 7, 0}, 0},
		{[]int{4, 5, 6, 7, 7, 1}, 0},
		{[]int{7, 6, 6, 0, 1, 2}, 1},
	} {
		tags := tagsWithHomes(tc.homes)
		s := subtableOf(8, tags)
		present := allTrue(len(tags))
		i, _ := s.lookup(tags[tc.del])
		s.removeAt(i)
		present[tc.del] = false
		if err := checkSubtable(s, tags, present); err != nil {
			t.Fatalf("homes %v, deleting #%d: %v", tc.homes, tc.del, err)
		}
	}
}

// scan with deletion visits every entry exactly once, deletes exactly the
// ones dropped, and leaves the rest reachable: exhaustively over five
// homes in 8 slots with two drop patterns (all, varying with the homes),
// and at random over fuller and bigger subtables with clustered homes
// (long wrapped runs).
func TestScanExactlyOnce(t *testing.T) {
	var visits []int
	try := func(size int, homes []int, drop func(k int) bool) {
		t.Helper()
		tags := tagsWithHomes(homes)
		s := subtableOf(size, tags)
		visits = append(visits[:0], make([]int, len(tags))...)
		examined := s.scan(func(tag uint64, e *entry) bool {
			k := int(e.s.Value)
			visits[k]++
			if tags[k] != tag {
				t.Fatalf("homes %v: scan gave tag %x with the entry of %x", homes, tag, tags[k])
			}
			return drop(k)
		})
		present := make([]bool, len(tags))
		for k := range tags {
			if visits[k] != 1 {
				t.Fatalf("size %d homes %v: #%d visited %d times", size, homes, k, visits[k])
			}
			present[k] = !drop(k)
		}
		if examined != len(tags) {
			t.Fatalf("size %d homes %v: examined %d, want %d", size, homes, examined, len(tags))
		}
		if err := checkSubtable(s, tags, present); err != nil {
			t.Fatalf("size %d homes %v after scan: %v", size, homes, err)
		}
	}
	const n = 5
	homes := make([]int, n)
	for code := 0; code < 1<<(3*n); code++ {
		for k := range homes {
			homes[k] = code >> (3 * k) & 7
		}
		pat := code * 2654435761 >> 7 // a drop pattern varying with the homes
		try(8, homes, func(int) bool { return true })
		try(8, homes, func(k int) bool { return pat>>k&1 == 1 })
	}
	r := rand.New(rand.NewPCG(11, 12))
	for iter := 0; iter < 1500; iter++ {
		size := 8 << r.IntN(4) // 8..64
		cnt := 1 + r.IntN(size*3/4)
		base, spread := r.IntN(size), 1+r.IntN(4)
		hs := make([]int, cnt)
		for k := range hs {
			hs[k] = (base + r.IntN(spread)) % size
		}
		mode, pat := r.IntN(3), r.Uint64()
		try(size, hs, func(k int) bool {
			switch mode {
			case 0:
				return true
			case 1:
				return pat>>(k%64)&1 == 1
			}
			return k%3 != 0
		})
	}
}

// Through the table: a thousand entries whose tags all have the last slot
// as their home at every subtable size (so one probe run wraps around the
// end), plus entries homed at the first slots, under deletions, updates,
// re-insertions and sweeps.
func TestWrappedRunThroughTable(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	tb := newTable()
	m := tableModel{}
	const n = 1000
	hs := make([]uint64, n)
	for k := range hs {
		home := uint64(0xFFF) // the last slot, whatever the size
		if k%5 == 0 {
			home = uint64(k/5) % 3 // the first slots, where the run wraps to
		}
		hs[k] = forgeHash(&tb, forgeTag(r, 0, 1, home), k%2 == 0)
		modelPut(&tb, m, modelID("w", k), hs[k], float64(k%10), false)
	}
	checkTable(t, &tb, m)
	if len(tb.dir) != 1 || len(tb.dir[0].tags) != 2048 {
		t.Fatalf("want one subtable of 2048 slots, got a directory of %d, %d slots", len(tb.dir), len(tb.dir[0].tags))
	}
	for round := 0; round < 6; round++ {
		for i := 0; i < 400; i++ {
			k := r.IntN(n)
			id := modelID("w", k)
			switch r.IntN(3) {
			case 0:
				tb.del(hs[k], id) // present or not
				delete(m, id)
			default:
				modelPut(&tb, m, id, hs[k], float64(r.IntN(11)), false)
			}
		}
		checkTable(t, &tb, m)
		if round%2 == 1 {
			checkSweep(t, &tb, m)
			checkTable(t, &tb, m)
		}
	}
	for id := range m {
		modelDel(&tb, m, id)
	}
	checkTable(t, &tb, m)
}

// Keys whose tags share their top 9 bits: every split of their subtable
// sends them all to one side until depth 9, so put splits again and again
// and doubles the directory inside one call; subtables of very different
// depths then share the directory. Then everything but a few is deleted,
// swept (shrunk to the minimum) and regrown.
func TestOneSidedSplits(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	tb := newTable()
	m := tableModel{}
	const n = 7000
	prefix := uint64(0b101100111)
	hs := make([]uint64, n)
	tags := map[uint64]bool{}
	for k := range hs {
		tag := forgeTag(r, prefix, 9, r.Uint64())
		for tags[tag] {
			tag = forgeTag(r, prefix, 9, r.Uint64())
		}
		tags[tag] = true
		hs[k] = forgeHash(&tb, tag, false)
		modelPut(&tb, m, modelID("o", k), hs[k], float64(k%10), false)
		if k == 3072 || k == n-1 {
			checkTable(t, &tb, m)
		}
	}
	if global := 64 - int(tb.shift); global < 10 {
		t.Fatalf("global depth %d: the keys did not force one-sided splits", global)
	}
	// A few neighbours elsewhere, in the shallow subtables.
	for k := 0; k < 50; k++ {
		modelPut(&tb, m, modelID("x", k), forgeHash(&tb, r.Uint64(), k%2 == 0), 3, false)
	}
	checkTable(t, &tb, m)
	// Delete all but 30 of the clustered keys, and sweep: every subtable
	// shrinks to what it holds.
	for k := 30; k < n; k++ {
		modelDel(&tb, m, modelID("o", k))
	}
	checkSweep(t, &tb, m)
	checkTable(t, &tb, m)
	tb.each(0, func(s *subtable, _ int) {
		if len(s.tags) > minSlots && s.n*4 <= len(s.tags) {
			t.Fatalf("after sweep: %d entries in %d slots, not shrunk", s.n, len(s.tags))
		}
	})
	// Regrow the same keys, now full and not.
	for k := 30; k < n; k++ {
		modelPut(&tb, m, modelID("o", k), hs[k], float64(k%11), k%97 == 0)
	}
	checkTable(t, &tb, m)
	checkSweep(t, &tb, m)
	checkTable(t, &tb, m)
}

// Exactly one overflow entry (the smallest non-empty overflow map), by a
// true hash collision and by a |1 tag collision: get, update and delete
// reach it, and deleting the main entry promotes it.
func TestSingleOverflowEntry(t *testing.T) {
	for _, alt := range []bool{false, true} {
		tb := newTable()
		m := tableModel{}
		tag := uint64(0x0123_4567_89ab_cdef)
		a, b := modelID("one", 0), modelID("one", 1)
		modelPut(&tb, m, a, forgeHash(&tb, tag, false), 1, false)
		modelPut(&tb, m, b, forgeHash(&tb, tag, alt), 2, false)
		if len(tb.overflow) != 1 {
			t.Fatalf("alt %v: overflow holds %d, want 1", alt, len(tb.overflow))
		}
		checkTable(t, &tb, m)
		modelPut(&tb, m, b, forgeHash(&tb, tag, alt), 3, false)
		checkTable(t, &tb, m)
		modelDel(&tb, m, a)
		mustMiss(t, &tb, forgeHash(&tb, tag, false), a)
		if len(tb.overflow) != 0 {
			t.Fatalf("alt %v: overflow holds %d after promotion", alt, len(tb.overflow))
		}
		checkTable(t, &tb, m)
		modelPut(&tb, m, a, forgeHash(&tb, tag, false), 4, false) // now a is the overflow entry
		checkTable(t, &tb, m)
		modelDel(&tb, m, a)
		checkTable(t, &tb, m)
	}
}

// Many overflow groups, of ids sharing one hash and of ids whose distinct
// hashes share a tag by its low bit, among thousands of other buckets (so
// subtables split around them), under puts, updates, deletions of main
// and overflow entries (promotion), Sweep and SweepSome with full and
// unknown-limit buckets, checked against the model after every phase.
func TestOverflowChurnWithSweeps(t *testing.T) {
	r := rand.New(rand.NewPCG(71, 72))
	p := newPartition(NopLog{}, frozen)
	tb := &p.buckets
	m := tableModel{}
	type member struct {
		id BucketID
		h  uint64
		g  int
	}
	var members []member
	group := map[int][]BucketID{}
	for g := 0; g < 300; g++ {
		tag := r.Uint64() | 1
		for i := 0; i < 2+r.IntN(4); i++ {
			h := forgeHash(tb, tag, false)
			if g%2 == 1 && i%2 == 1 {
				h = forgeHash(tb, tag, true) // a different hash, the same tag
			}
			id := BucketID{Name: "m", Key: fmt.Sprintf("g%d-%d", g, i), Shard: uint32(i)}
			members = append(members, member{id, h, g})
			group[g] = append(group[g], id)
		}
	}
	others := make([]uint64, 5000)
	for k := range others {
		others[k] = forgeHash(tb, r.Uint64(), false)
	}
	promotions := 0
	for round := 0; round < 9; round++ {
		for i := 0; i < 2500; i++ {
			if r.IntN(3) == 0 {
				k := r.IntN(len(others))
				if id := modelID("n", k); r.IntN(3) == 0 {
					tb.del(others[k], id) // present or not
					delete(m, id)
				} else {
					modelPut(tb, m, id, others[k], float64(r.IntN(11)), false)
				}
				continue
			}
			mb := members[r.IntN(len(members))]
			switch r.IntN(4) {
			case 0:
				if isMain(tb, mb.h, mb.id) {
					for _, o := range group[mb.g] {
						if _, ok := m[o]; ok && o != mb.id {
							promotions++ // one of them must be promoted
							break
						}
					}
				}
				tb.del(mb.h, mb.id) // present or not
				delete(m, mb.id)
				mustMiss(t, tb, mb.h, mb.id)
			case 1:
				e, ok := tb.get(mb.h, mb.id)
				v, want := m[mb.id]
				if ok != want || ok && (e.s.Value != v.v || e.id != mb.id) {
					t.Fatalf("round %d: get(%v) = %+v %v, model %+v %v", round, mb.id, e, ok, v, want)
				}
			default:
				modelPut(tb, m, mb.id, mb.h, float64(r.IntN(11)), r.IntN(20) == 0)
			}
		}
		checkTable(t, tb, m)
		switch round % 3 {
		case 0:
			checkSweep(t, tb, m)
		case 1:
			full := 0
			for _, v := range m {
				if v.full() {
					full++
				}
			}
			before, ov := p.Len(), len(tb.overflow)
			dropped, _ := p.SweepSome(t0, 1)
			if p.Len() != before-dropped {
				t.Fatalf("round %d: SweepSome dropped %d, Len %d -> %d", round, dropped, before, p.Len())
			}
			if ov > 0 && dropped != full {
				// With overflow around, SweepSome is a whole Sweep.
				t.Fatalf("round %d: SweepSome with overflow dropped %d of %d full", round, dropped, full)
			}
			pruneSwept(t, tb, m)
		}
		checkTable(t, tb, m)
	}
	if promotions < 100 {
		t.Fatalf("only %d promotions: the test needs more", promotions)
	}
	// Delete every member in a random order: overflow ends empty.
	r.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
	for _, mb := range members {
		tb.del(mb.h, mb.id)
		delete(m, mb.id)
		mustMiss(t, tb, mb.h, mb.id)
	}
	checkTable(t, tb, m)
	if len(tb.overflow) != 0 {
		t.Fatalf("overflow holds %d after deleting every colliding id", len(tb.overflow))
	}
}

// isMain reports whether id is the main entry (not overflow) of h's tag.
func isMain(tb *table, h uint64, id BucketID) bool {
	s, _ := tb.sub(tb.tag(h))
	i, ok := s.lookup(tb.tag(h))
	return ok && s.ents[i].id == id
}

// Depth 0 (shift 64): one subtable fills the whole directory; the index of
// every tag, even one with all top bits set, is 0; it doubles in place up
// to maxSlots before the first split; span, each, SweepSome's cursor and
// shrink all work on the one-slot directory.
func TestDepthZero(t *testing.T) {
	tb := newTable()
	m := tableModel{}
	if tb.shift != 64 || len(tb.dir) != 1 {
		t.Fatalf("new table: shift %d, directory %d", tb.shift, len(tb.dir))
	}
	if s, w := tb.span(0, 0); s != 0 || w != 1 {
		t.Fatalf("span(0, 0) = %d, %d", s, w)
	}
	r := rand.New(rand.NewPCG(91, 92))
	var hs []uint64
	for k := 0; k < 3072; k++ {
		tag := r.Uint64() | 0xFFFF_0000_0000_0001 // top bits set
		hs = append(hs, forgeHash(&tb, tag, false))
		modelPut(&tb, m, modelID("d", k), hs[k], float64(k%11), false)
		if tb.shift != 64 || len(tb.dir) != 1 {
			t.Fatalf("after %d puts: split before maxSlots (shift %d)", k+1, tb.shift)
		}
		if want := minSlots; k < 6 && len(tb.dir[0].tags) != want {
			t.Fatalf("after %d puts: %d slots, want %d", k+1, len(tb.dir[0].tags), want)
		}
	}
	if len(tb.dir[0].tags) != maxSlots {
		t.Fatalf("3072 entries in %d slots, want %d", len(tb.dir[0].tags), maxSlots)
	}
	checkTable(t, &tb, m)
	calls := 0
	tb.each(0, func(s *subtable, j int) {
		calls++
		if j != 0 || s != tb.dir[0] {
			t.Fatalf("each at depth 0: j %d", j)
		}
	})
	if calls != 1 {
		t.Fatalf("each at depth 0 called %d times", calls)
	}
	// One step of SweepSome with budget 1 covers the whole table, twice.
	p := &Partition{buckets: tb}
	for pass := 0; pass < 2; pass++ {
		full := dropFull(m)
		n0 := p.Len()
		d, e := p.SweepSome(t0, 1)
		if d != full || e != n0 || p.buckets.cursor != 1 {
			t.Fatalf("pass %d: SweepSome dropped %d of %d, examined %d of %d, cursor %d", pass, d, full, e, n0, p.buckets.cursor)
		}
		checkTable(t, &p.buckets, m)
	}
	tb = p.buckets
	// Delete all but 3 and sweep: back to minSlots; then the 3073rd key
	// makes the first split.
	for k := 3; k < 3072; k++ {
		tb.del(hs[k], modelID("d", k)) // present or not (swept)
		delete(m, modelID("d", k))
	}
	checkSweep(t, &tb, m)
	if len(tb.dir[0].tags) != minSlots || tb.shift != 64 {
		t.Fatalf("after deleting all but 3: %d slots, shift %d", len(tb.dir[0].tags), tb.shift)
	}
	checkTable(t, &tb, m)
	for k := 0; k < 3073; k++ {
		modelPut(&tb, m, modelID("e", k), forgeHash(&tb, r.Uint64(), k%2 == 0), 1, false)
	}
	if tb.shift == 64 {
		t.Fatal("no split after 3076 entries")
	}
	checkTable(t, &tb, m)
}

// touch is read-only and safe on every table shape: it reads the home
// slot of any hash, present or not, at depth 0, after splits and after
// shrinks, and returns tags[home]^TS of that slot; the table is unchanged.
func TestTouch(t *testing.T) {
	r := rand.New(rand.NewPCG(101, 102))
	tb := newTable()
	m := tableModel{}
	probe := func(when string) {
		t.Helper()
		for i := 0; i < 2000; i++ {
			h := r.Uint64()
			if i%2 == 0 && len(m) > 0 {
				for _, v := range m {
					h = v.h
					break
				}
			}
			tag := tb.tag(h)
			s := tb.dir[int(tag>>tb.shift)]
			hm := int(tag>>1) & (len(s.tags) - 1)
			if got, want := tb.touch(h), s.tags[hm]^uint64(s.ents[hm].s.TS); got != want {
				t.Fatalf("%s: touch(%x) = %x, want %x", when, h, got, want)
			}
		}
		checkTable(t, &tb, m)
	}
	probe("empty")
	for k := 0; k < 10000; k++ {
		modelPut(&tb, m, modelID("t", k), forgeHash(&tb, r.Uint64(), false), float64(k%11), false)
	}
	probe("split")
	for k := 0; k < 9990; k++ {
		modelDel(&tb, m, modelID("t", k))
	}
	checkSweep(t, &tb, m)
	probe("shrunk")
}
