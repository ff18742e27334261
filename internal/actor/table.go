package actor

import (
	"math/rand/v2"

	"github.com/seed7fbd42b6/ratelimit/internal/bucket"
)

// table is a partition's bucket map, keyed by the bucket's 64-bit table
// hash (Item.Hash: bucket.TableHash and bucket.ShardHash) and verified
// against the full id on every hit; the (astronomically rare) ids whose
// hash is taken by another live id are kept, exactly, in an overflow map.
//
// It is an extendible-hashing directory of small open-addressing
// subtables (linear probing, backward-shift deletion), rather than a Go
// map, for three reasons:
//   - an entry is exactly one cache line and a probe reads one more line of
//     eight tags, and a batch can touch both lines of every lookup before
//     deciding (touch), so the misses of a batch overlap instead of
//     queueing one by one;
//   - growth splits one subtable of at most maxSlots entries, never
//     rehashes millions at once (the same bound Go's maps keep);
//   - SweepSome can resume where it stopped, and sparse subtables shrink,
//     so memory follows the live buckets.
//
// The table hash is seeded per process (bucket.TableHash), and positions mix it
// with a random per-table seed as well, so keys chosen to collide or to
// pile up in one place cannot be found offline.
type table struct {
	dir      []*subtable // indexed by the tag's top bits; a subtable of depth d fills 2^(global-d) consecutive slots
	shift    uint        // 64 - global depth
	seed     uint64
	n        int
	overflow map[BucketID]ovEntry // ids whose hash is taken in the subtables by another id
	cursor   int                  // SweepSome's next directory index
	// moves counts the changes that may move entries of the subtables
	// (growth, shrinking, deletion, sweeping): a pointer getRef returned
	// stays valid while it is unchanged.
	moves uint64
}

type subtable struct {
	depth int      // local depth: its tags share their top depth bits
	n     int      // entries
	tags  []uint64 // tag of each slot, 0 for empty; power-of-two length
	ents  []entry
}

type ovEntry struct {
	h uint64 // the table key the caller used
	e entry
}

// entry is one bucket: 64 bytes, a cache line.
type entry struct {
	id  BucketID
	s   bucket.State
	lim *bucket.Limit // nil for a bucket recovered under an unknown limit
}

const (
	minSlots = 8
	maxSlots = 1 << 12 // a split rehashes at most ~3k entries
)

func newTable() table {
	return table{dir: []*subtable{newSubtable(0, minSlots)}, shift: 64, seed: rand.Uint64()}
}

func newSubtable(depth, slots int) *subtable {
	return &subtable{depth: depth, tags: make([]uint64, slots), ents: make([]entry, slots)}
}

// tag is h mixed with the seed (a bijection: murmur3's finalizer), with
// the low bit set so that 0 can mean empty. Two hashes differing only in
// the low bit of their mix share a tag: the second is an overflow entry,
// like a true collision.
func (t *table) tag(h uint64) uint64 {
	h ^= t.seed
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h | 1
}

// sub returns the subtable of tag and its directory index.
func (t *table) sub(tag uint64) (*subtable, int) {
	j := int(tag >> t.shift) // 0 while the global depth is 0 (shift 64)
	return t.dir[j], j
}

func (s *subtable) home(tag uint64) int { return int(tag>>1) & (len(s.tags) - 1) }

// lookup returns the slot holding tag, or the empty slot where a probe for
// it ends.
func (s *subtable) lookup(tag uint64) (i int, ok bool) {
	mask := len(s.tags) - 1
	for i = s.home(tag); ; i = (i + 1) & mask {
		switch s.tags[i] {
		case tag:
			return i, true
		case 0:
			return i, false
		}
	}
}

// insert puts a tag known to be absent, without a load check.
func (s *subtable) insert(tag uint64, e *entry) {
	i, _ := s.lookup(tag)
	s.tags[i], s.ents[i] = tag, *e
	s.n++
}

// removeAt empties slot i and shifts later entries of its probe run back,
// so that no lookup stops early (no tombstones).
func (s *subtable) removeAt(i int) {
	mask := len(s.tags) - 1
	s.n--
	for j := i; ; {
		j = (j + 1) & mask
		tg := s.tags[j]
		if tg == 0 {
			s.tags[i], s.ents[i] = 0, entry{}
			return
		}
		// The entry at j may move to the hole at i if its home is not in
		// (i, j]: its probe distance reaches back to i.
		if (j-s.home(tg))&mask >= (j-i)&mask {
			s.tags[i], s.ents[i] = tg, s.ents[j]
			i = j
		}
	}
}

// touch reads the two lines a lookup of h reads first and returns a value
// made of them (so the loads are not optimized away). Touching a whole
// batch before deciding it overlaps the batch's cache misses.
func (t *table) touch(h uint64) uint64 {
	tag := t.tag(h)
	s, _ := t.sub(tag)
	i := s.home(tag)
	return s.tags[i] ^ uint64(s.ents[i].s.TS)
}

// getRef is the state of bucket id (table hash h), with a pointer to its
// entry in its subtable (nil for an overflow entry), valid while t.moves
// is unchanged: storing through it spares a second lookup. It returns the
// state alone, which fits in registers, rather than a copy of the entry.
func (t *table) getRef(h uint64, id BucketID) (st bucket.State, ref *entry, ok bool) {
	tag := t.tag(h)
	s, _ := t.sub(tag)
	i, ok := s.lookup(tag)
	if !ok {
		return bucket.State{}, nil, false
	}
	if ref := &s.ents[i]; ref.id == id {
		return ref.s, ref, true
	}
	if len(t.overflow) > 0 {
		o, ok := t.overflow[id]
		return o.e.s, nil, ok
	}
	return bucket.State{}, nil, false
}

func (t *table) put(h uint64, e entry) {
	tag := t.tag(h)
	for {
		s, j := t.sub(tag)
		i, ok := s.lookup(tag)
		if ok {
			if s.ents[i].id == e.id {
				s.ents[i] = e
				return
			}
			if t.overflow == nil {
				t.overflow = make(map[BucketID]ovEntry)
			}
			t.overflow[e.id] = ovEntry{h, e}
			return
		}
		if (s.n+1)*4 <= len(s.tags)*3 {
			s.tags[i], s.ents[i] = tag, e
			s.n++
			t.n++
			return
		}
		t.grow(s, j)
	}
}

func (t *table) del(h uint64, id BucketID) { t.delTag(t.tag(h), id) }

func (t *table) delTag(tag uint64, id BucketID) {
	t.moves++
	s, _ := t.sub(tag)
	i, ok := s.lookup(tag)
	if !ok {
		return
	}
	if s.ents[i].id != id {
		delete(t.overflow, id)
		return
	}
	s.removeAt(i)
	t.n--
	// Promote an overflow entry with the same tag, if any.
	for oid, o := range t.overflow {
		if t.tag(o.h) == tag {
			delete(t.overflow, oid)
			t.put(o.h, o.e)
			return
		}
	}
}

func (t *table) len() int { return t.n + len(t.overflow) }

// span returns the directory range [start, start+width) of the subtable of
// depth d at index j.
func (t *table) span(j, d int) (start, width int) {
	width = 1 << (64 - int(t.shift) - d)
	return j &^ (width - 1), width
}

// replace points s's directory range (s is at index j) at ns.
func (t *table) replace(j int, s, ns *subtable) {
	t.moves++
	start, width := t.span(j, s.depth)
	for k := start; k < start+width; k++ {
		t.dir[k] = ns
	}
}

// rebuilt returns s's entries in a subtable of the given size.
func rebuilt(s *subtable, slots int) *subtable {
	ns := newSubtable(s.depth, slots)
	for i, tg := range s.tags {
		if tg != 0 {
			ns.insert(tg, &s.ents[i])
		}
	}
	return ns
}

// grow makes room in the full subtable s (at index j): double it, or, at
// maxSlots, split it in two by the next bit of the tag, doubling the
// directory if s already uses every directory bit.
func (t *table) grow(s *subtable, j int) {
	t.moves++
	if len(s.tags) < maxSlots {
		t.replace(j, s, rebuilt(s, 2*len(s.tags)))
		return
	}
	if s.depth == 64-int(t.shift) {
		dir := make([]*subtable, 2*len(t.dir))
		for k, x := range t.dir {
			dir[2*k], dir[2*k+1] = x, x
		}
		t.dir, t.shift, t.cursor, j = dir, t.shift-1, 2*t.cursor, 2*j
	}
	lo, hi := newSubtable(s.depth+1, len(s.tags)), newSubtable(s.depth+1, len(s.tags))
	bit := uint64(1) << (63 - s.depth)
	for i, tg := range s.tags {
		switch {
		case tg == 0:
		case tg&bit == 0:
			lo.insert(tg, &s.ents[i])
		default:
			hi.insert(tg, &s.ents[i])
		}
	}
	start, width := t.span(j, s.depth)
	for k := start; k < start+width; k++ {
		if k < start+width/2 {
			t.dir[k] = lo
		} else {
			t.dir[k] = hi
		}
	}
}

// shrink rebuilds s (at index j) smaller if it is mostly empty, so that
// memory follows the live buckets after a sweep.
func (t *table) shrink(s *subtable, j int) {
	slots := len(s.tags)
	for slots > minSlots && s.n*4 <= slots {
		slots /= 2
	}
	if slots < len(s.tags) {
		t.replace(j, s, rebuilt(s, slots))
	}
}

// scan calls f on every entry of s once, in slot order starting after an
// empty slot; f returning true deletes the entry. A deletion shifts only
// entries not yet visited (a probe run never crosses an empty slot), so
// the slot is examined again rather than skipped. It returns how many
// entries it examined.
func (s *subtable) scan(f func(tag uint64, e *entry) (drop bool)) (examined int) {
	mask := len(s.tags) - 1
	z := 0
	for s.tags[z] != 0 { // an empty slot exists: load is below 3/4
		z++
	}
	for k := 1; k < len(s.tags); k++ {
		i := (z + k) & mask
		for s.tags[i] != 0 {
			examined++
			if !f(s.tags[i], &s.ents[i]) {
				break
			}
			s.removeAt(i)
		}
	}
	return examined
}

// each calls f on every subtable once, with the start of its directory
// range, from the range holding directory index from until the end.
func (t *table) each(from int, f func(s *subtable, j int)) {
	for j := from; j < len(t.dir); {
		s := t.dir[j]
		start, width := t.span(j, s.depth)
		f(s, start) // may replace s by a rebuilt one of the same depth
		j = start + width
	}
}
