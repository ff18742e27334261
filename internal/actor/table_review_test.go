package actor

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"testing"

	"github.com/cespare/xxhash/v2"
	"github.com/seed7fbd42b6/ratelimit/internal/bucket"
)

// Adversarial tests of table (table.go) and its users Sweep, SweepSome
// (visit.go) and touch, touchAhead (prefetch.go). Every test compares the
// table with an independent model (a Go map, or a set of tags) and checks
// the table's structural invariants with rvCheck.
//
// Keys are forged: rvHash inverts table.tag, so a test chooses the exact
// tag of every entry (its directory bits, its home slot, its low bit)
// whatever the table's random seed, and the tests are deterministic.

// rvInv is the inverse of the odd c modulo 2^64 (Newton's iteration; c is
// its own inverse to 3 bits, and each step doubles the correct bits).
func rvInv(c uint64) uint64 {
	x := c
	for i := 0; i < 6; i++ {
		x *= 2 - c*x
	}
	return x
}

// rvUnmix inverts the finalizer of table.tag (before its |1).
func rvUnmix(x uint64) uint64 {
	x ^= x >> 33 // a xorshift by >= 32 is its own inverse
	x *= rvInv(0xc4ceb9fe1a85ec53)
	x ^= x >> 33
	x *= rvInv(0xff51afd7ed558ccd)
	x ^= x >> 33
	return x
}

// rvHash is a table hash whose tag in tb is tag|1. The hashes of alt false
// and true differ and share that tag (the |1 collision).
func rvHash(tb *table, tag uint64, alt bool) uint64 {
	m := tag | 1
	if alt {
		m &^= 1
	}
	return rvUnmix(m) ^ tb.seed
}

// rvTag is a tag whose top prefixBits bits are prefix, whose home bits
// (1..12: the home slot in a subtable of any size, masked) are home, and
// whose other bits come from r.
func rvTag(r *rand.Rand, prefix uint64, prefixBits int, home uint64) uint64 {
	x := r.Uint64()
	if prefixBits > 0 {
		x = x&(^uint64(0)>>prefixBits) | prefix<<(64-prefixBits)
	}
	x = x&^(uint64(0xFFF)<<1) | (home&0xFFF)<<1
	return x | 1
}

// rvVal is the model of one bucket: the hash its caller uses, its value,
// and whether its limit is unknown (nil: never full).
type rvVal struct {
	h       uint64
	v       float64
	unknown bool
}

type rvModel map[BucketID]rvVal

func (v rvVal) full() bool { return !v.unknown && v.v >= 10 }

var rvLim = tokenLim(10) // full at 10 under the frozen clock

func rvID(prefix string, k int) BucketID {
	return BucketID{Name: "rv", Key: fmt.Sprintf("%s%d", prefix, k)}
}

// rvPut stores (id, v) in tb and in the model.
func rvPut(tb *table, m rvModel, id BucketID, h uint64, v float64, unknown bool) {
	e := entry{id: id, s: st(v), lim: rvLim}
	if unknown {
		e.lim = nil
	}
	tb.put(h, e)
	m[id] = rvVal{h: h, v: v, unknown: unknown}
}

// rvDel deletes id, present in the model, from tb and the model.
func rvDel(tb *table, m rvModel, id BucketID) {
	tb.del(m[id].h, id)
	delete(m, id)
}

// rvCheck checks tb's invariants and that it holds exactly the model:
//   - the directory has 2^global slots, and every subtable of depth d fills
//     one aligned range of 2^(global-d) of them, and no other;
//   - every subtable has a power-of-two size in [minSlots, maxSlots], a
//     correct n, a load of at most 3/4, cleared empty slots;
//   - every tag is odd, lies in its subtable's directory range, is unique,
//     and is reachable: no empty slot between its home and its slot;
//   - the entries are exactly the model's (id, tag of its hash, value,
//     limit), each once, in main or in overflow; every overflow entry's tag
//     is held in main by another id; t.n and len() are right;
//   - get finds every entry.
func rvCheck(t *testing.T, tb *table, m rvModel) {
	t.Helper()
	if err := rvCheckErr(tb, m); err != nil {
		t.Fatal(err)
	}
	for id, v := range m {
		e, ok := tb.get(v.h, id)
		if !ok || e.id != id || e.s.Value != v.v || (e.lim == nil) != v.unknown {
			t.Fatalf("get(%v) = %+v %v, model %+v", id, e, ok, v)
		}
	}
}

func rvCheckErr(tb *table, m rvModel) error {
	global := 64 - int(tb.shift)
	if global < 0 || global > 30 || len(tb.dir) != 1<<global {
		return fmt.Errorf("directory of %d for shift %d", len(tb.dir), tb.shift)
	}
	if tb.cursor < 0 || tb.cursor > len(tb.dir) {
		return fmt.Errorf("cursor %d outside directory of %d", tb.cursor, len(tb.dir))
	}
	if c := tb.cursor; c < len(tb.dir) && c%(1<<(global-tb.dir[c].depth)) != 0 {
		return fmt.Errorf("cursor %d inside the range of a subtable of depth %d", c, tb.dir[c].depth)
	}
	seen := map[BucketID]bool{}
	mainTag := map[uint64]BucketID{}
	subs := map[*subtable]bool{}
	total := 0
	for j := 0; j < len(tb.dir); {
		s := tb.dir[j]
		if s == nil || s.depth < 0 || s.depth > global {
			return fmt.Errorf("dir[%d]: bad subtable", j)
		}
		if subs[s] {
			return fmt.Errorf("dir[%d]: subtable already seen in another range", j)
		}
		subs[s] = true
		width := 1 << (global - s.depth)
		if j%width != 0 {
			return fmt.Errorf("dir[%d]: range of depth %d not aligned", j, s.depth)
		}
		for k := j; k < j+width; k++ {
			if tb.dir[k] != s {
				return fmt.Errorf("dir[%d] differs from dir[%d] within a range of depth %d", k, j, s.depth)
			}
		}
		size := len(s.tags)
		if size < minSlots || size > maxSlots || size&(size-1) != 0 || len(s.ents) != size {
			return fmt.Errorf("dir[%d]: %d slots, %d entries", j, size, len(s.ents))
		}
		cnt := 0
		for i, tg := range s.tags {
			if tg == 0 {
				if s.ents[i] != (entry{}) {
					return fmt.Errorf("dir[%d] slot %d: empty slot holds %+v", j, i, s.ents[i])
				}
				continue
			}
			cnt++
			if tg&1 == 0 {
				return fmt.Errorf("even tag %x", tg)
			}
			if k := int(tg >> tb.shift); global > 0 && (k < j || k >= j+width) {
				return fmt.Errorf("tag %x (dir index %d) in the subtable of [%d,%d)", tg, k, j, j+width)
			}
			for p := s.home(tg); p != i; p = (p + 1) & (size - 1) {
				if s.tags[p] == 0 {
					return fmt.Errorf("tag %x at slot %d unreachable: empty slot %d after its home %d", tg, i, p, s.home(tg))
				}
			}
			if _, dup := mainTag[tg]; dup {
				return fmt.Errorf("tag %x twice", tg)
			}
			e := &s.ents[i]
			mainTag[tg] = e.id
			v, ok := m[e.id]
			switch {
			case !ok:
				return fmt.Errorf("%v in the table, not in the model", e.id)
			case seen[e.id]:
				return fmt.Errorf("%v twice", e.id)
			case tb.tag(v.h) != tg:
				return fmt.Errorf("%v under tag %x, its hash's tag is %x", e.id, tg, tb.tag(v.h))
			case e.s.Value != v.v || (e.lim == nil) != v.unknown:
				return fmt.Errorf("%v = %+v, model %+v", e.id, *e, v)
			}
			seen[e.id] = true
		}
		if cnt != s.n {
			return fmt.Errorf("dir[%d]: n %d, counted %d", j, s.n, cnt)
		}
		if 4*cnt > 3*size {
			return fmt.Errorf("dir[%d]: %d entries in %d slots", j, cnt, size)
		}
		total += cnt
		j += width
	}
	if total != tb.n {
		return fmt.Errorf("t.n %d, counted %d", tb.n, total)
	}
	for id, o := range tb.overflow {
		v, ok := m[id]
		switch {
		case !ok:
			return fmt.Errorf("%v in overflow, not in the model", id)
		case seen[id]:
			return fmt.Errorf("%v in main and overflow", id)
		case o.e.id != id || o.h != v.h || o.e.s.Value != v.v || (o.e.lim == nil) != v.unknown:
			return fmt.Errorf("overflow %v = %+v, model %+v", id, o, v)
		}
		if owner, ok := mainTag[tb.tag(o.h)]; !ok || owner == id {
			return fmt.Errorf("overflow %v: its tag %x is not held in main by another id", id, tb.tag(o.h))
		}
		seen[id] = true
	}
	if len(seen) != len(m) || tb.len() != len(m) {
		return fmt.Errorf("table holds %d (len %d), model %d", len(seen), tb.len(), len(m))
	}
	return nil
}

// The forging helper itself: the tests below mean nothing without it.
func TestReviewForgery(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for _, seed := range []uint64{0, 1, 0xdeadbeef, r.Uint64()} {
		tb := newTable()
		tb.seed = seed
		for i := 0; i < 1000; i++ {
			tag := r.Uint64() | 1
			h, h2 := rvHash(&tb, tag, false), rvHash(&tb, tag, true)
			if h == h2 || tb.tag(h) != tag || tb.tag(h2) != tag {
				t.Fatalf("seed %x tag %x: hashes %x %x have tags %x %x", seed, tag, h, h2, tb.tag(h), tb.tag(h2))
			}
		}
	}
}

// rvSub is a subtable of the given size holding tags, inserted in order,
// the entry of tags[k] holding the value k.
func rvSub(size int, tags []uint64) *subtable {
	s := newSubtable(0, size)
	for k, tg := range tags {
		s.insert(tg, &entry{s: st(float64(k))})
	}
	return s
}

// rvCheckSub checks that s holds exactly the tags[k] with present[k], each
// with its own entry (value k), each reachable from its home (no empty
// slot between) and found by lookup, and that the absent ones are missing.
func rvCheckSub(s *subtable, tags []uint64, present []bool) error {
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

// rvHomesTags are distinct tags with the given homes (distinct high bits).
func rvHomesTags(homes []int) []uint64 {
	tags := make([]uint64, len(homes))
	for k, h := range homes {
		tags[k] = uint64(k+1)<<40 | uint64(h)<<1 | 1
	}
	return tags
}

func rvAll(n int) []bool {
	p := make([]bool, n)
	for k := range p {
		p[k] = true
	}
	return p
}

// Backward-shift deletion, exhaustively: every sequence of five homes in
// an 8-slot subtable (every shape of run, wrapped or not), deleting each
// entry in turn (and inserting one again), against the set of tags.
func TestReviewBackwardShiftExhaustive(t *testing.T) {
	const size, n = 8, 5
	homes := make([]int, n)
	for code := 0; code < 1<<(3*n); code++ {
		for k := range homes {
			homes[k] = code >> (3 * k) & 7
		}
		tags := rvHomesTags(homes)
		orig := rvSub(size, tags)
		for del := 0; del < n; del++ {
			s := &subtable{n: orig.n, tags: append([]uint64(nil), orig.tags...), ents: append([]entry(nil), orig.ents...)}
			present := rvAll(n)
			i, ok := s.lookup(tags[del])
			if !ok {
				t.Fatalf("homes %v: tag %d not found", homes, del)
			}
			s.removeAt(i)
			present[del] = false
			if err := rvCheckSub(s, tags, present); err != nil {
				t.Fatalf("homes %v, after deleting #%d (slot %d): %v", homes, del, i, err)
			}
			if del == code%n { // and insert it again, once per shape
				s.insert(tags[del], &entry{s: st(float64(del))})
				present[del] = true
				if err := rvCheckSub(s, tags, present); err != nil {
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
func TestReviewDeleteBeforeWrappedRun(t *testing.T) {
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
		tags := rvHomesTags(tc.homes)
		s := rvSub(8, tags)
		present := rvAll(len(tags))
		i, _ := s.lookup(tags[tc.del])
		s.removeAt(i)
		present[tc.del] = false
		if err := rvCheckSub(s, tags, present); err != nil {
			t.Fatalf("homes %v, deleting #%d: %v", tc.homes, tc.del, err)
		}
	}
}

// scan with deletion visits every entry exactly once, deletes exactly the
// ones dropped, and leaves the rest reachable: exhaustively over five
// homes in 8 slots with two drop patterns (all, varying with the homes),
// and at random over fuller and bigger subtables with clustered homes
// (long wrapped runs).
func TestReviewScanExactlyOnce(t *testing.T) {
	var visits []int
	try := func(size int, homes []int, drop func(k int) bool) {
		t.Helper()
		tags := rvHomesTags(homes)
		s := rvSub(size, tags)
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
		if err := rvCheckSub(s, tags, present); err != nil {
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
func TestReviewWrappedRunThroughTable(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	tb := newTable()
	m := rvModel{}
	const n = 1000
	hs := make([]uint64, n)
	for k := range hs {
		home := uint64(0xFFF) // the last slot, whatever the size
		if k%5 == 0 {
			home = uint64(k/5) % 3 // the first slots, where the run wraps to
		}
		hs[k] = rvHash(&tb, rvTag(r, 0, 1, home), k%2 == 0)
		rvPut(&tb, m, rvID("w", k), hs[k], float64(k%10), false)
	}
	rvCheck(t, &tb, m)
	if len(tb.dir) != 1 || len(tb.dir[0].tags) != 2048 {
		t.Fatalf("want one subtable of 2048 slots, got a directory of %d, %d slots", len(tb.dir), len(tb.dir[0].tags))
	}
	for round := 0; round < 6; round++ {
		for i := 0; i < 400; i++ {
			k := r.IntN(n)
			id := rvID("w", k)
			switch r.IntN(3) {
			case 0:
				tb.del(hs[k], id) // present or not
				delete(m, id)
			default:
				rvPut(&tb, m, id, hs[k], float64(r.IntN(11)), false)
			}
		}
		rvCheck(t, &tb, m)
		if round%2 == 1 {
			rvSweep(t, &tb, m)
			rvCheck(t, &tb, m)
		}
	}
	for id := range m {
		rvDel(&tb, m, id)
	}
	rvCheck(t, &tb, m)
}

// rvSweep runs Sweep on tb and checks it against the model: it visits each
// entry that is not full exactly once, drops exactly the full ones, and
// the model loses them too.
func rvSweep(t *testing.T, tb *table, m rvModel) {
	t.Helper()
	p := &Partition{buckets: *tb}
	visits := map[BucketID]int{}
	dropped := p.Sweep(t0, func(id BucketID, s bucket.State) {
		visits[id]++
		if v, ok := m[id]; !ok || v.v != s.Value {
			t.Fatalf("Sweep visited %v = %v, model %+v %v", id, s.Value, v, ok)
		}
	})
	*tb = p.buckets
	full := 0
	for id, v := range m {
		if v.full() {
			full++
			if visits[id] != 0 {
				t.Fatalf("full %v visited", id)
			}
			if _, ok := tb.get(v.h, id); ok {
				t.Fatalf("full %v kept by Sweep", id)
			}
			delete(m, id)
		} else if visits[id] != 1 {
			t.Fatalf("%v visited %d times", id, visits[id])
		}
	}
	if dropped != full {
		t.Fatalf("Sweep dropped %d, want %d", dropped, full)
	}
	if len(visits) != len(m) {
		t.Fatalf("Sweep visited %d buckets, want %d", len(visits), len(m))
	}
}

// Keys whose tags share their top 9 bits: every split of their subtable
// sends them all to one side until depth 9, so put splits again and again
// and doubles the directory inside one call; subtables of very different
// depths then share the directory. Then everything but a few is deleted,
// swept (shrunk to the minimum) and regrown.
func TestReviewOneSidedSplits(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	tb := newTable()
	m := rvModel{}
	const n = 7000
	prefix := uint64(0b101100111)
	hs := make([]uint64, n)
	tags := map[uint64]bool{}
	for k := range hs {
		tag := rvTag(r, prefix, 9, r.Uint64())
		for tags[tag] {
			tag = rvTag(r, prefix, 9, r.Uint64())
		}
		tags[tag] = true
		hs[k] = rvHash(&tb, tag, false)
		rvPut(&tb, m, rvID("o", k), hs[k], float64(k%10), false)
		if k == 3072 || k == n-1 {
			rvCheck(t, &tb, m)
		}
	}
	if global := 64 - int(tb.shift); global < 10 {
		t.Fatalf("global depth %d: the keys did not force one-sided splits", global)
	}
	// A few neighbours elsewhere, in the shallow subtables.
	for k := 0; k < 50; k++ {
		rvPut(&tb, m, rvID("x", k), rvHash(&tb, r.Uint64(), k%2 == 0), 3, false)
	}
	rvCheck(t, &tb, m)
	// Delete all but 30 of the clustered keys, and sweep: every subtable
	// shrinks to what it holds.
	for k := 30; k < n; k++ {
		rvDel(&tb, m, rvID("o", k))
	}
	rvSweep(t, &tb, m)
	rvCheck(t, &tb, m)
	tb.each(0, func(s *subtable, _ int) {
		if len(s.tags) > minSlots && s.n*4 <= len(s.tags) {
			t.Fatalf("after sweep: %d entries in %d slots, not shrunk", s.n, len(s.tags))
		}
	})
	// Regrow the same keys, now full and not.
	for k := 30; k < n; k++ {
		rvPut(&tb, m, rvID("o", k), hs[k], float64(k%11), k%97 == 0)
	}
	rvCheck(t, &tb, m)
	rvSweep(t, &tb, m)
	rvCheck(t, &tb, m)
}

// Every bucket full: Sweep drops all, visits none, shrinks every subtable
// to the minimum; the table then regrows to the same size and a cycle of
// SweepSome calls of budget 1 drops all again.
func TestReviewSweepAllFullThenRegrow(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	tb := newTable()
	m := rvModel{}
	const n = 10000
	for k := 0; k < n; k++ {
		rvPut(&tb, m, rvID("f", k), rvHash(&tb, r.Uint64(), false), 10, false)
	}
	rvCheck(t, &tb, m)
	dirLen := len(tb.dir)
	rvSweep(t, &tb, m)
	if len(m) != 0 || tb.len() != 0 {
		t.Fatalf("after sweeping all-full: len %d", tb.len())
	}
	rvCheck(t, &tb, m)
	tb.each(0, func(s *subtable, _ int) {
		if len(s.tags) != minSlots || s.n != 0 {
			t.Fatalf("after sweeping all-full: subtable of %d slots, %d entries", len(s.tags), s.n)
		}
	})
	if len(tb.dir) != dirLen {
		t.Fatalf("directory changed from %d to %d", dirLen, len(tb.dir))
	}
	for k := 0; k < n; k += 13 {
		mustMiss(t, &tb, rvHash(&tb, r.Uint64(), false), rvID("f", k))
	}
	for k := 0; k < n; k++ {
		rvPut(&tb, m, rvID("g", k), rvHash(&tb, r.Uint64(), k%3 == 0), 10, false)
	}
	rvCheck(t, &tb, m)
	p := &Partition{buckets: tb}
	dropped, examined := rvSweepSomeCycle(t, p, 1)
	tb = p.buckets
	if dropped != n || examined != n || tb.len() != 0 {
		t.Fatalf("SweepSome cycle over %d full: dropped %d, examined %d, len %d", n, dropped, examined, tb.len())
	}
	for id := range m {
		delete(m, id)
	}
	rvCheck(t, &tb, m)
}

// rvSweepSomeCycle calls SweepSome with budget until the calls have
// examined as many buckets as the table held at the start (no overflow):
// one pass over every subtable, which must examine each bucket exactly once.
// rvDropFull removes the full buckets from m (what a sweep drops) and
// returns how many there were.
func rvDropFull(m rvModel) int {
	full := 0
	for id, v := range m {
		if v.full() {
			full++
			delete(m, id)
		}
	}
	return full
}

func rvSweepSomeCycle(t *testing.T, p *Partition, budget int) (dropped, examined int) {
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

// SweepSome with budget 1 steps one non-empty subtable at a time: a pass
// examines every bucket exactly once, drops exactly the full ones, keeps
// the others intact, whatever the cursor's start, at global depth 0 and
// in a directory with subtables of mixed depths.
func TestReviewSweepSomeBudgetOne(t *testing.T) {
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
			m := rvModel{}
			for k := 0; k < tc.n; k++ {
				tag := r.Uint64()
				if tc.prefix > 0 && k%2 == 0 {
					tag = rvTag(r, 0b101, tc.prefix, r.Uint64())
				}
				rvPut(tb, m, rvID("b", k), rvHash(tb, tag, false), float64(k%11), k%50 == 0)
			}
			if tc.n <= 40 && tb.shift != 64 {
				t.Fatalf("%d keys: global depth %d, want 0", tc.n, 64-tb.shift)
			}
			rvCheck(t, tb, m)
			for pass := 0; pass < 3; pass++ {
				full := rvDropFull(m)
				// Budget 1, then a budget beyond everything: one call, one
				// pass exactly, ending where it started.
				budget, c0 := 1, tb.cursor%len(tb.dir)
				if pass == 2 {
					budget = 1 << 30
				}
				n0 := p.Len()
				dropped, examined := rvSweepSomeCycle(t, p, budget)
				if dropped != full || examined != n0 {
					t.Fatalf("pass %d: dropped %d of %d full, examined %d of %d", pass, dropped, full, examined, n0)
				}
				if c := tb.cursor % len(tb.dir); budget > 1 && c != c0 {
					t.Fatalf("a whole pass moved the cursor from %d to %d", c0, c)
				}
				rvCheck(t, tb, m)
				// Make some full again, starting the next pass elsewhere.
				for id, v := range m {
					if r.IntN(3) == 0 && !v.unknown {
						rvPut(tb, m, id, v.h, 10, false)
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
func TestReviewSweepSomeCursorAcrossDoubling(t *testing.T) {
	r := rand.New(rand.NewPCG(61, 62))
	p := newPartition(NopLog{}, frozen)
	tb := &p.buckets
	m := rvModel{}
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
				if err := rvCheckErr(tb, rvPrune(t, tb, m)); err != nil {
					t.Fatalf("cluster %d, after %d: %v", c, i, err)
				}
			}
			before, dirBefore := tb.cursor, len(tb.dir)
			rvPut(tb, m, rvID("c", k), rvHash(tb, rvTag(r, prefix, bits, r.Uint64()), false), float64(r.IntN(11)), false)
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
	rvPrune(t, tb, m)
	// Now a full pass from wherever the cursor is drops every full bucket.
	full := rvDropFull(m)
	n0 := p.Len()
	dropped, examined := rvSweepSomeCycle(t, p, 1+r.IntN(3000))
	if dropped != full || examined != n0 {
		t.Fatalf("final pass: dropped %d of %d full, examined %d of %d", dropped, full, examined, n0)
	}
	rvCheck(t, tb, m)
}

// rvPrune removes from the model the full buckets the table no longer
// holds (a partial sweep dropped them), failing on a bucket that is not
// full and missing, and returns the model.
func rvPrune(t *testing.T, tb *table, m rvModel) rvModel {
	t.Helper()
	for id, v := range m {
		if _, ok := tb.get(v.h, id); !ok {
			if !v.full() {
				t.Fatalf("%v (value %v, not full) lost", id, v.v)
			}
			delete(m, id)
		}
	}
	return m
}

// Many overflow groups, of ids sharing one hash and of ids whose distinct
// hashes share a tag by its low bit, among thousands of other buckets (so
// subtables split around them), under puts, updates, deletions of main
// and overflow entries (promotion), Sweep and SweepSome with full and
// unknown-limit buckets, checked against the model after every phase.
func TestReviewOverflowChurnWithSweeps(t *testing.T) {
	r := rand.New(rand.NewPCG(71, 72))
	p := newPartition(NopLog{}, frozen)
	tb := &p.buckets
	m := rvModel{}
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
			h := rvHash(tb, tag, false)
			if g%2 == 1 && i%2 == 1 {
				h = rvHash(tb, tag, true) // a different hash, the same tag
			}
			id := BucketID{Name: "rv", Key: fmt.Sprintf("g%d-%d", g, i), Shard: uint32(i)}
			members = append(members, member{id, h, g})
			group[g] = append(group[g], id)
		}
	}
	others := make([]uint64, 5000)
	for k := range others {
		others[k] = rvHash(tb, r.Uint64(), false)
	}
	promotions := 0
	for round := 0; round < 9; round++ {
		for i := 0; i < 2500; i++ {
			if r.IntN(3) == 0 {
				k := r.IntN(len(others))
				if id := rvID("n", k); r.IntN(3) == 0 {
					tb.del(others[k], id) // present or not
					delete(m, id)
				} else {
					rvPut(tb, m, id, others[k], float64(r.IntN(11)), false)
				}
				continue
			}
			mb := members[r.IntN(len(members))]
			switch r.IntN(4) {
			case 0:
				if rvIsMain(tb, mb.h, mb.id) {
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
				rvPut(tb, m, mb.id, mb.h, float64(r.IntN(11)), r.IntN(20) == 0)
			}
		}
		rvCheck(t, tb, m)
		switch round % 3 {
		case 0:
			rvSweep(t, tb, m)
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
			rvPrune(t, tb, m)
		}
		rvCheck(t, tb, m)
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
	rvCheck(t, tb, m)
	if len(tb.overflow) != 0 {
		t.Fatalf("overflow holds %d after deleting every colliding id", len(tb.overflow))
	}
}

// rvIsMain reports whether id is the main entry (not overflow) of h's tag.
func rvIsMain(tb *table, h uint64, id BucketID) bool {
	s, _ := tb.sub(tb.tag(h))
	i, ok := s.lookup(tb.tag(h))
	return ok && s.ents[i].id == id
}

// Sweep with overflow entries around, where every bucket is full or only
// the main entries or only the overflow entries are: whatever is not full
// survives, reachable through its own hash, and each is visited once.
func TestReviewSweepOverflowPatterns(t *testing.T) {
	for _, pattern := range []string{"all-full", "main-full", "overflow-full", "alternate", "none"} {
		t.Run(pattern, func(t *testing.T) {
			r := rand.New(rand.NewPCG(81, 82))
			tb := newTable()
			m := rvModel{}
			for g := 0; g < 200; g++ {
				tag := r.Uint64() | 1
				for i := 0; i < 4; i++ {
					h := rvHash(&tb, tag, i%2 == 1)
					v := 3.0
					switch {
					case pattern == "all-full",
						pattern == "main-full" && i == 0,
						pattern == "overflow-full" && i > 0,
						pattern == "alternate" && (g+i)%2 == 0:
						v = 10
					}
					rvPut(&tb, m, BucketID{Name: "rv", Key: fmt.Sprintf("p%d", g), Shard: uint32(i)}, h, v, false)
				}
			}
			for k := 0; k < 3300; k++ { // with the 800 above: a split
				rvPut(&tb, m, rvID("q", k), rvHash(&tb, r.Uint64(), false), float64(k%11), false)
			}
			rvCheck(t, &tb, m)
			if len(tb.overflow) != 600 {
				t.Fatalf("overflow holds %d, want 600", len(tb.overflow))
			}
			rvSweep(t, &tb, m)
			rvCheck(t, &tb, m)
			rvSweep(t, &tb, m) // nothing left to drop
			rvCheck(t, &tb, m)
		})
	}
}

// Exactly one overflow entry (the smallest non-empty overflow map), by a
// true hash collision and by a |1 tag collision: get, update and delete
// reach it, and deleting the main entry promotes it.
func TestReviewSingleOverflowEntry(t *testing.T) {
	for _, alt := range []bool{false, true} {
		tb := newTable()
		m := rvModel{}
		tag := uint64(0x0123_4567_89ab_cdef)
		a, b := rvID("one", 0), rvID("one", 1)
		rvPut(&tb, m, a, rvHash(&tb, tag, false), 1, false)
		rvPut(&tb, m, b, rvHash(&tb, tag, alt), 2, false)
		if len(tb.overflow) != 1 {
			t.Fatalf("alt %v: overflow holds %d, want 1", alt, len(tb.overflow))
		}
		rvCheck(t, &tb, m)
		rvPut(&tb, m, b, rvHash(&tb, tag, alt), 3, false)
		rvCheck(t, &tb, m)
		rvDel(&tb, m, a)
		mustMiss(t, &tb, rvHash(&tb, tag, false), a)
		if len(tb.overflow) != 0 {
			t.Fatalf("alt %v: overflow holds %d after promotion", alt, len(tb.overflow))
		}
		rvCheck(t, &tb, m)
		rvPut(&tb, m, a, rvHash(&tb, tag, false), 4, false) // now a is the overflow entry
		rvCheck(t, &tb, m)
		rvDel(&tb, m, a)
		rvCheck(t, &tb, m)
	}
}

// SweepSome with overflow entries around sweeps everything (to keep
// promotion exact) and reports how many buckets it examined: all it held.
func TestReviewSweepSomeOverflowReportsExamined(t *testing.T) {
	p := newPartition(NopLog{}, frozen)
	tb := &p.buckets
	m := rvModel{}
	h, ids := collidingIDs(3)
	for _, id := range ids {
		rvPut(tb, m, id, h, 10, false) // all full
	}
	rvPut(tb, m, rvID("z", 0), rvHash(tb, 12345, false), 4, false)
	before := p.Len()
	dropped, examined := p.SweepSome(t0, 1)
	if dropped != 3 || p.Len() != 1 {
		t.Fatalf("dropped %d, Len %d; want 3, 1", dropped, p.Len())
	}
	if examined != before {
		t.Errorf("SweepSome examined all %d buckets (Sweep), reports %d", before, examined)
	}
}

// Depth 0 (shift 64): one subtable fills the whole directory; the index of
// every tag, even one with all top bits set, is 0; it doubles in place up
// to maxSlots before the first split; span, each, SweepSome's cursor and
// shrink all work on the one-slot directory.
func TestReviewDepthZero(t *testing.T) {
	tb := newTable()
	m := rvModel{}
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
		hs = append(hs, rvHash(&tb, tag, false))
		rvPut(&tb, m, rvID("d", k), hs[k], float64(k%11), false)
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
	rvCheck(t, &tb, m)
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
		full := rvDropFull(m)
		n0 := p.Len()
		d, e := p.SweepSome(t0, 1)
		if d != full || e != n0 || p.buckets.cursor != 1 {
			t.Fatalf("pass %d: SweepSome dropped %d of %d, examined %d of %d, cursor %d", pass, d, full, e, n0, p.buckets.cursor)
		}
		rvCheck(t, &p.buckets, m)
	}
	tb = p.buckets
	// Delete all but 3 and sweep: back to minSlots; then the 3073rd key
	// makes the first split.
	for k := 3; k < 3072; k++ {
		tb.del(hs[k], rvID("d", k)) // present or not (swept)
		delete(m, rvID("d", k))
	}
	rvSweep(t, &tb, m)
	if len(tb.dir[0].tags) != minSlots || tb.shift != 64 {
		t.Fatalf("after deleting all but 3: %d slots, shift %d", len(tb.dir[0].tags), tb.shift)
	}
	rvCheck(t, &tb, m)
	for k := 0; k < 3073; k++ {
		rvPut(&tb, m, rvID("e", k), rvHash(&tb, r.Uint64(), k%2 == 0), 1, false)
	}
	if tb.shift == 64 {
		t.Fatal("no split after 3076 entries")
	}
	rvCheck(t, &tb, m)
}

// touch is read-only and safe on every table shape: it reads the home
// slot of any hash, present or not, at depth 0, after splits and after
// shrinks, and returns tags[home]^TS of that slot; the table is unchanged.
func TestReviewTouch(t *testing.T) {
	r := rand.New(rand.NewPCG(101, 102))
	tb := newTable()
	m := rvModel{}
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
		rvCheck(t, &tb, m)
	}
	probe("empty")
	for k := 0; k < 10000; k++ {
		rvPut(&tb, m, rvID("t", k), rvHash(&tb, r.Uint64(), false), float64(k%11), false)
	}
	probe("split")
	for k := 0; k < 9990; k++ {
		rvDel(&tb, m, rvID("t", k))
	}
	rvSweep(t, &tb, m)
	probe("shrunk")
}

// touchAhead's accounting against a model: before batch[i] is handled,
// messages [i, next) are touched, pending is the sum of their touched
// items (at most prefetchWindow each), message i itself is touched, and it
// stops only once prefetchWindow items are pending (or the batch ends),
// overshooting by at most one message. A lone one-item batch is not
// touched. Items' hashes are looked up in a populated table.
func TestReviewTouchAheadAccounting(t *testing.T) {
	r := rand.New(rand.NewPCG(111, 112))
	p := newPartition(NopLog{}, frozen)
	m := rvModel{}
	for k := 0; k < 5000; k++ {
		rvPut(&p.buckets, m, rvID("a", k), rvHash(&p.buckets, r.Uint64(), false), 1, false)
	}
	touched := func(msg msg) int { return min(int(msg.hi-msg.lo), prefetchWindow) }
	for iter := 0; iter < 500; iter++ {
		nmsg := 1 + r.IntN(12)
		batch := make([]msg, nmsg)
		for b := range batch {
			c := NewCall()
			items := r.IntN(3)
			if r.IntN(4) == 0 {
				items = r.IntN(100)
			}
			for i := 0; i < items+2; i++ {
				c.Items = append(c.Items, Item{Hash: r.Uint64()})
			}
			lo := r.IntN(2)
			batch[b] = msg{call: c, kind: kindDecide, lo: int32(lo), hi: int32(lo + items)}
			if r.IntN(6) == 0 {
				batch[b] = msg{call: &Call{}, kind: kindRun}
			}
		}
		p.ahead = prefetcher{}
		for i := range batch {
			p.touchAhead(batch, i)
			f := p.ahead
			if nmsg == 1 && batch[0].hi-batch[0].lo <= 2 {
				if f != (prefetcher{}) {
					t.Fatalf("lone batch of %d items touched: %+v", batch[0].hi-batch[0].lo, f)
				}
				continue
			}
			want := 0
			for k := i; k < f.next; k++ {
				want += touched(batch[k])
			}
			switch {
			case f.next <= i || f.next > nmsg:
				t.Fatalf("batch %d, before #%d: next %d", iter, i, f.next)
			case f.pending != want:
				t.Fatalf("batch %d, before #%d: pending %d, touched-and-undecided %d", iter, i, f.pending, want)
			case f.next < nmsg && f.pending < prefetchWindow:
				t.Fatalf("batch %d, before #%d: stopped at %d with %d pending", iter, i, f.next, f.pending)
			case f.next-1 > i && f.pending-touched(batch[f.next-1]) >= prefetchWindow:
				t.Fatalf("batch %d, before #%d: touched past the window (%d pending)", iter, i, f.pending)
			}
		}
	}
	rvCheck(t, &p.buckets, m)
}

// XXH64's primes; rvXXKey inverts XXH64 (seed 0) on inputs of fewer than
// 32 bytes, where it is a chain of bijections of the last 8-byte lane.
const (
	rvP1 uint64 = 11400714785074694791
	rvP2 uint64 = 14029467366897019727
	rvP3 uint64 = 1609587929392839161
	rvP4 uint64 = 9650029242287828579
	rvP5 uint64 = 2870177450012600261
)

// rvUnshift inverts h ^= h >> s.
func rvUnshift(h uint64, s uint) uint64 {
	x := h
	for i := uint(0); i < 64; i += s {
		x = h ^ x>>s
	}
	return x
}

// rvXXKey is the key of len(prefix)+8 bytes (prefix a multiple of 8
// bytes, shorter than 24) starting with prefix whose xxhash64 is target:
// a key colliding with any other, so bucket.Hash collides too.
func rvXXKey(prefix string, target uint64) string {
	n := uint64(len(prefix) + 8)
	lane := func(h, k uint64) uint64 {
		h ^= bits.RotateLeft64(k*rvP2, 31) * rvP1
		return bits.RotateLeft64(h, 27)*rvP1 + rvP4
	}
	h := rvP5 + n
	for i := 0; i < len(prefix); i += 8 {
		h = lane(h, binary.LittleEndian.Uint64([]byte(prefix[i:i+8])))
	}
	x := rvUnshift(target, 32) * rvInv(rvP3)
	x = rvUnshift(x, 29) * rvInv(rvP2)
	x = rvUnshift(x, 33)
	x = bits.RotateLeft64((x-rvP4)*rvInv(rvP1), -27) ^ h // the last lane's round
	k := bits.RotateLeft64(x*rvInv(rvP1), -31) * rvInv(rvP2)
	b := binary.LittleEndian.AppendUint64([]byte(prefix), k)
	return string(b)
}

func rvOne(op Op, count float64, it Item) *Call {
	c := NewCall()
	c.Atomic = true
	i := c.AddItem(it, 0, false)
	c.Members = append(c.Members, Member{Op: op, Count: count, First: i, Second: -1})
	return c
}

// Real collisions, not forged table hashes: keys whose bucket.Hash is one
// value (XXH64 is invertible on short keys, so anyone can make them). They
// share a partition but not a table hash (TableHash is seeded per
// process), and go through takes, credits back to full (store deletes the
// bucket), resets, and a Sweep, against a model of every bucket's value.
func TestReviewRealHashCollisionsThroughGroup(t *testing.T) {
	g := newGroup(t, 2, NopLog{}, frozen)
	lim := tokenLim(10)
	const name = "api"
	keys := []string{"victim", rvXXKey("", xxhash.Sum64String("victim"))}
	for i := 0; len(keys) < 12; i++ {
		keys = append(keys, rvXXKey(fmt.Sprintf("prefix%02d", i), xxhash.Sum64String("victim")))
	}
	items := make([]Item, len(keys))
	model := make([]float64, len(keys))
	for k, key := range keys {
		items[k] = itemFor(g, lim, name, key, 0)
		model[k] = 10
		// bucket.Hash (routing) collides, so they share a partition; the
		// table hash is seeded (TableHash), so they must not collide there.
		if bucket.Hash(name, key) != bucket.Hash(name, keys[0]) || items[k].Part != items[0].Part {
			t.Fatalf("key %q: bucket hash %x part %d, want a collision with %x %d", key, bucket.Hash(name, key), items[k].Part, bucket.Hash(name, keys[0]), items[0].Part)
		}
		if k > 0 && items[k].Hash == items[0].Hash {
			t.Fatalf("key %q: table hash %x equals the victim's: TableHash is not seeded", key, items[k].Hash)
		}
	}
	checkAll := func(when string) {
		t.Helper()
		for k, it := range items {
			if v := value(t, g, it); v != model[k] {
				t.Fatalf("%s: key #%d = %v, model %v", when, k, v, model[k])
			}
		}
	}
	r := rand.New(rand.NewPCG(121, 122))
	for op := 0; op < 300; op++ {
		k := r.IntN(len(keys))
		count := float64(1 + r.IntN(4))
		switch r.IntN(5) {
		case 0, 1, 2:
			c := rvOne(OpTake, count, items[k])
			decide(t, g, c)
			if ok := model[k] >= count; c.Members[0].OK != ok {
				t.Fatalf("op %d: take %v of #%d (model %v): OK %v", op, count, k, model[k], c.Members[0].OK)
			} else if ok {
				model[k] -= count
			}
			c.Release()
		case 3:
			c := rvOne(OpCredit, count, items[k])
			decide(t, g, c)
			model[k] = min(10, model[k]+count)
			c.Release()
		case 4:
			c := NewCall()
			c.AddItem(items[k], -1, false)
			g.Reset(c)
			c.Release()
			model[k] = 10
		}
		if op%25 == 0 {
			checkAll(fmt.Sprintf("op %d", op))
		}
	}
	checkAll("end")
	// The partition's table holds exactly the buckets that are not full.
	m := rvModel{}
	for k, it := range items {
		if model[k] < 10 {
			m[it.ID] = rvVal{h: it.Hash, v: model[k]}
		}
	}
	var err error
	g.Run(int(items[0].Part), func(p *Partition) { err = rvCheckErr(&p.buckets, m) })
	if err != nil {
		t.Fatal(err)
	}
	// Sweep visits exactly the buckets that are not full, once each.
	want := 0
	for _, v := range model {
		if v < 10 {
			want++
		}
	}
	var visited, left int
	seen := map[BucketID]int{}
	g.Run(int(items[0].Part), func(p *Partition) {
		p.Sweep(t0, func(id BucketID, s bucket.State) {
			if id.Name == name {
				visited++
				seen[id]++
			}
		})
		left = p.Len()
	})
	if visited != want || len(seen) != want || left != want {
		t.Fatalf("Sweep visited %d (%d distinct), Len %d; want %d", visited, len(seen), left, want)
	}
	checkAll("after sweep")
}
