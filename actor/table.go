package actor

import "github.com/seed7fbd42b6/ratelimit/bucket"

// table is a partition's bucket map. It is keyed by the bucket's 64-bit
// hash, because a Go map keyed by a struct of two strings costs ~400 ns a
// lookup on this runtime against ~10 ns for a uint64; every hit is verified
// against the full id, and the (astronomically rare) buckets whose hash
// collides with another live one are kept, exactly, in an overflow map.
type table struct {
	main     map[uint64]entry
	overflow map[BucketID]ovEntry // ids whose hash is taken in main by another id
}

type ovEntry struct {
	h uint64 // the table key the caller used
	e entry
}

type entry struct {
	id  BucketID
	s   bucket.State
	lim *bucket.Limit // nil for a bucket recovered under an unknown limit
}

func newTable() table { return table{main: make(map[uint64]entry)} }

// BucketHash mixes a bucket's (name, key) hash with its shard.
func BucketHash(h uint64, shard uint32) uint64 {
	return h ^ uint64(shard)*0x9E3779B97F4A7C15
}

func (t *table) get(h uint64, id BucketID) (entry, bool) {
	e, ok := t.main[h]
	if ok && e.id == id {
		return e, true
	}
	if ok && len(t.overflow) > 0 {
		o, ok := t.overflow[id]
		return o.e, ok
	}
	return entry{}, false
}

func (t *table) put(h uint64, e entry) {
	old, ok := t.main[h]
	if !ok || old.id == e.id {
		t.main[h] = e
		return
	}
	if t.overflow == nil {
		t.overflow = make(map[BucketID]ovEntry)
	}
	t.overflow[e.id] = ovEntry{h, e}
}

func (t *table) del(h uint64, id BucketID) {
	old, ok := t.main[h]
	if !ok {
		return
	}
	if old.id != id {
		delete(t.overflow, id)
		return
	}
	delete(t.main, h)
	// Promote an overflow entry with the same hash, if any.
	for oid, o := range t.overflow {
		if o.h == h {
			t.main[h] = o.e
			delete(t.overflow, oid)
			return
		}
	}
}

func (t *table) len() int { return len(t.main) + len(t.overflow) }
