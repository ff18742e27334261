package actor

import (
	"encoding/binary"
	"math"
	"sync/atomic"
	"unsafe"

	"github.com/seed7fbd42b6/ratelimit/internal/bucket"
)

// Repeating a denial without the mutex. A bucket at its limit is read far
// more often than it changes. Once DecideAlone has denied the same bucket
// publishAfter times running under the partition's mutex, it publishes
// the request (bucket, limit, count, reserve) and the bucket's state; a
// caller that brings the same request is then decided from that state
// with no lock, and when it is denied again that is the answer. The
// answer is the one the mutex would give at the caller's clock reading:
// the same state, nothing written. The record also carries the reading
// from which the request is granted (bucket.Limit.GrantAt), worked out
// once when it is published: until then a repeat is denied and waits the
// difference, which is the exact wait the mutex's holder would work out,
// without working it out. A grant, or any other outcome, goes through the
// mutex as before; a grant of the published bucket publishes its new
// state. Atomic calls decided under the mutexes publish their denials
// too, and one that a record denies is decided without that partition's
// mutex (Group.decideDenied).
//
// The record is a sequence lock. The partition's epoch is odd while the
// record is being written; it moves on when an executor takes the
// partition's token (and may change anything) and when the published
// bucket is written under the mutex. A reader uses the record only when
// the epoch is even, equals the epoch the record was published at, and is
// the same after every field has been read. Every field is atomic, so a
// reader never sees a torn string: keys are kept as words, and only keys
// of at most denialKeyBytes bytes are published.

// denialKeyBytes is the longest key a published denial carries.
const denialKeyBytes = 32

// publishAfter is how many denials of one bucket in a row, with no other
// bucket denied in between, make it worth publishing.
const publishAfter = 4

// denialStripes spreads the counts of unlocked denials over cache lines,
// so that callers on different processors seldom write the same one.
const denialStripes = 32

// stripe picks the caller's stripe from the address of its stack, which
// differs between goroutines and seldom changes for one: a caller keeps
// writing the same line, and callers seldom share one.
func stripe() uint32 {
	var x byte
	a := uint64(uintptr(unsafe.Pointer(&x)))
	return uint32((a>>11)*0x9E3779B97F4A7C15>>32) % denialStripes
}

// denials is a partition's published denial.
type denials struct {
	epoch  atomic.Uint64 // see the top of this file
	pub    atomic.Uint64 // the epoch the record was published at
	hash   atomic.Uint64 // the bucket's Item.Hash
	lim    atomic.Pointer[bucket.Limit]
	shard  atomic.Uint32
	keyLen atomic.Uint32
	key    [denialKeyBytes / 8]atomic.Uint64

	count   atomic.Uint64 // math.Float64bits of the request's count
	reserve atomic.Bool
	value   atomic.Uint64 // math.Float64bits of the state's value
	ts      atomic.Int64  // the state's ts
	now     atomic.Int64  // the reading the decision was made at
	grantAt atomic.Int64  // from when the request is granted (bucket.Limit.GrantAt); now when unknown
	_       [8]byte       // the counts start a cache line of their own

	counts [denialStripes]struct {
		n atomic.Uint64
		_ [56]byte
	}
}

// invalidate makes the record apply no more, if it does: an executor is
// taking the partition's token, and may change anything until it gives
// it back (nothing is published meanwhile: DecideAlone publishes only on
// an idle partition). Called with p.mu held. The epoch is written only
// when a record applies, so that executors running a partition with
// nothing published leave its readers' cache line alone.
func (d *denials) invalidate() {
	if d.pub.Load() == d.epoch.Load() {
		d.epoch.Add(2) // even still, and no longer the record's
	}
}

// decided follows DecideAlone's decision of mem on it's bucket at p.now,
// with p.mu held. A bucket that the table holds and that is denied
// publishAfter times running (no other bucket denied here in between) is
// published: publishing costs a few atomic stores and working out when the
// request would be granted, spent on buckets at their limit rather than on
// every denial. A grant that wrote the published bucket publishes its new
// state, so that a bucket at its limit, granted now and then, stays
// published. When it publishes a denied request, decided returns the
// reading from which that request is granted, if there is one.
func (p *Partition) decided(it *Item, mem *Member) (grantAt int64, ok bool) {
	d := p.denials
	switch {
	case it.Err != nil || mem.Op == OpCredit:
		d.wrote(it)
	case !mem.OK:
		if it.ref == nil { // not in the table: a record would not apply
			return 0, false
		}
		if p.denied != it.Hash {
			p.denied, p.deniedRun = it.Hash, 0
		}
		if p.deniedRun++; p.deniedRun >= publishAfter || d.holds(it) {
			return d.publish(it, mem, p.now)
		}
	case it.Write && d.ofBucket(it):
		if d.lim.Load() == it.Lim {
			d.publish(it, mem, p.now)
		} else {
			d.invalidate()
		}
	}
	return 0, false
}

// wrote moves the epoch on if it was written and is the record's bucket,
// under whatever limit it was written. Called with p.mu held, after a
// decision under it.
func (d *denials) wrote(it *Item) {
	if it.Write && d.ofBucket(it) {
		d.invalidate()
	}
}

// holds reports whether the record is of it's bucket read under it's
// limit: the request the record can answer.
func (d *denials) holds(it *Item) bool {
	return d.lim.Load() == it.Lim && d.ofBucket(it)
}

// holdsUnhashed is holds without it.Hash, which a caller that repeats a
// denial has not worked out (Group.RepeatDenial): a limit belongs to one
// name, so the limit, shard and key name the bucket.
func (d *denials) holdsUnhashed(it *Item) bool {
	return d.lim.Load() == it.Lim && d.shard.Load() == it.ID.Shard && d.keyIs(it.ID.Key)
}

// ofBucket reports whether the record is of it's bucket, under any limit
// (the table hash first: most misses end there). One bucket can be read
// and written under several limits (a name's inline configs, or a named
// limit and an inline one, each with its own Limit): a write under any of
// them changes the state the record holds.
func (d *denials) ofBucket(it *Item) bool {
	return d.hash.Load() == it.Hash && d.shard.Load() == it.ID.Shard && d.keyIs(it.ID.Key)
}

// publish records mem's decision on it's bucket, whose state is now
// it.State, at now, with the reading from which the request would be
// granted, which it returns when there is one. Called with p.mu held. A
// key too long to publish leaves the record as it is: it is of another
// bucket.
func (d *denials) publish(it *Item, mem *Member, now int64) (grantAt int64, ok bool) {
	if len(it.ID.Key) > denialKeyBytes {
		return 0, false
	}
	grantAt, ok = it.Lim.GrantAt(it.State, now, mem.Count, mem.Reserve)
	e := d.epoch.Add(1)
	// The request's identity is stored only when it changes: a bucket
	// that keeps denying republishes only its state.
	if !d.holds(it) {
		d.hash.Store(it.Hash)
		d.lim.Store(it.Lim)
		d.shard.Store(it.ID.Shard)
		d.keyLen.Store(uint32(len(it.ID.Key)))
		var w [denialKeyBytes / 8]uint64
		packKey(&w, it.ID.Key)
		for i := range w {
			d.key[i].Store(w[i])
		}
	}
	if c := math.Float64bits(mem.Count); d.count.Load() != c || d.reserve.Load() != mem.Reserve {
		d.count.Store(c)
		d.reserve.Store(mem.Reserve)
	}
	d.value.Store(math.Float64bits(it.State.Value))
	d.ts.Store(it.State.TS)
	d.now.Store(now)
	if ok {
		d.grantAt.Store(grantAt)
	} else {
		d.grantAt.Store(now)
	}
	d.pub.Store(e + 1)
	d.epoch.Store(e + 1)
	return grantAt, ok
}

// repeat decides mem on it's bucket at now from the published denial,
// if it applies: a take or check of the same count and reserve on the
// same bucket, under the same limit, with nothing changed since and a
// reading no earlier than the denial's, that is still denied. It fills
// mem.OK and u as decideSingle would, counts the denial, and reports
// whether it did.
func (d *denials) repeat(it *Item, mem *Member, now int64, clock func() int64, u *undescribed) bool {
	var r record
	if !d.read(it, mem, &r) {
		return false
	}
	s, at, grantAt := r.s, r.at, r.grantAt
	if now < at {
		// Read before the denial's reading: read again, as the mutex's
		// holder would (Partition.setNow).
		if now = clock(); now < at {
			return false
		}
	}
	if grantAt > at {
		// Try's answer on s changes once, at grantAt (bucket.Limit.GrantAt).
		if now >= grantAt {
			return false
		}
		u.prior, u.next, u.lim, u.now, u.grantAt, u.timed = s, s, it.Lim, now, grantAt, true
	} else {
		next, ok := it.Lim.Try(s, now, mem.Count, mem.Reserve)
		if ok {
			return false
		}
		u.prior, u.next, u.lim, u.now = s, next, it.Lim, now
	}
	mem.OK = false
	it.State = s
	if mem.Op == OpTake {
		d.counts[stripe()].n.Add(1)
	}
	return true
}

// record is a published denial as a reader saw it.
type record struct {
	s           bucket.State
	at, grantAt int64  // the denial's reading; from when it is granted (see denials.grantAt)
	epoch       uint64 // the partition's epoch it was read at
}

// read reads the published record into r and reports whether it applies
// to mem on it's bucket (it.Hash unread): a take or check of the same
// count and reserve on the same bucket, under the same limit, with nothing
// changed since it was published. The record stays true while the epoch
// is r.epoch (see current). r is filled field by field, not returned: a
// struct returned in registers and then copied as a whole is read back
// in wider words than it was stored in, which stalls the processor.
func (d *denials) read(it *Item, mem *Member, r *record) bool {
	e := d.epoch.Load()
	if e&1 != 0 || d.pub.Load() != e || !d.holdsUnhashed(it) ||
		d.count.Load() != math.Float64bits(mem.Count) || d.reserve.Load() != mem.Reserve {
		return false
	}
	r.s.Value = math.Float64frombits(d.value.Load())
	r.s.TS = d.ts.Load()
	r.at = d.now.Load()
	r.grantAt = d.grantAt.Load()
	r.epoch = e
	return d.epoch.Load() == e
}

// current reports whether a record read at epoch e is still true.
func (d *denials) current(e uint64) bool { return d.epoch.Load() == e }

// keyIs reports whether the published key is key.
func (d *denials) keyIs(key string) bool {
	n := len(key)
	if n > denialKeyBytes || d.keyLen.Load() != uint32(n) {
		return false
	}
	// Keys of one length mostly differ at their end (numbered keys, and
	// any other at random): the last word is compared first.
	for i := (n+7)/8 - 1; i >= 0; i-- {
		if d.key[i].Load() != keyWord(key, i) {
			return false
		}
	}
	return true // the words past the key's are zero in both
}

// denied is how many denials were repeated without the mutex.
func (d *denials) denied() uint64 {
	var n uint64
	for i := range d.counts {
		n += d.counts[i].n.Load()
	}
	return n
}

// packKey puts key (at most denialKeyBytes bytes) into w, little-endian,
// the rest zero.
func packKey(w *[denialKeyBytes / 8]uint64, key string) {
	*w = [denialKeyBytes / 8]uint64{}
	for i := range (len(key) + 7) / 8 {
		w[i] = keyWord(key, i)
	}
}

// keyWord is word i of key as packKey packs it: bytes 8i to 8i+7,
// little-endian, zero past the key's end (i < ceil(len(key)/8)). It reads
// whole words, and a short end as two overlapping loads, rather than a
// byte at a time.
func keyWord(key string, i int) uint64 {
	b := unsafe.Slice(unsafe.StringData(key), len(key))
	j, n := 8*i, len(b)
	switch r := n - j; {
	case r >= 8:
		return binary.LittleEndian.Uint64(b[j:])
	case r >= 4:
		return uint64(binary.LittleEndian.Uint32(b[j:])) | uint64(binary.LittleEndian.Uint32(b[n-4:]))<<(8*(r-4))
	case r >= 2:
		return uint64(binary.LittleEndian.Uint16(b[j:])) | uint64(binary.LittleEndian.Uint16(b[n-2:]))<<(8*(r-2))
	default:
		return uint64(b[j])
	}
}
