package redislimit

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/seed7fbd42b6/ratelimit"
	"github.com/seed7fbd42b6/ratelimit/internal/bucket"
)

// A program is one function call: the units of the parts queued on one or
// more tags, a section per tag, encoded as script.lua reads them
// (little-endian):
//
//	header   nLimits, nItems, nSections, firstBucketKey, nBucketKeys, sweep, verify uint16; holdMs float64
//	limit    kind uint8; rate, period, capacity, maxReserved, periodUs, periodRem float64
//	item     key, limit uint16; phaseUs, phaseRem float64
//	section  dropKey, expiryKey, nUnits uint16
//	unit     kind uint8; n, holdKey uint16; then n of:
//	  decide member  op, reserve, role uint8; a, b uint16; count float64
//	                 (rolePair: otherValue, otherUs, otherRem, atUs, atRem, held float64; otherIsA uint8)
//	  peek, reset    item uint16
//	  settle entry   item uint16; expectPresent uint8; value, us, rem float64;
//	                 targetPresent uint8; value, us, rem float64; amount float64
//
// with the units of every section in section order. Keys and items are
// numbered from 1; 0 is "none". The sections' drop records and expiry
// indexes come first among the keys, then the holds, then the buckets,
// which the function reads at once. The reply is the clock reading (us,
// rem float64), then per unit a status byte and, for decide (per member:
// a, then b) and peek (per item), the prior state of each item: present
// uint8; value, us, rem float64. With verify set (tests), a granted decide
// unit is followed by the states it left its items in, in the same form.
//
// On a cluster a program has one section (its keys must share a slot); on
// a single server, one per tag of its round.
type program struct {
	keys   []string
	keyIdx map[string]uint16
	lims   []*bucket.Limit
	nItems int
	nUnits int
	size   int     // items its parts add (see part.size)
	tags   []int32 // per section: its tag
	ends   []int   // per section: the end of its parts in parts
	limBuf []byte
	itBuf  []byte
	secBuf []byte
	unBuf  []byte
	out    []byte
	parts  []*part
}

// addSection appends tag's parts as a section.
func (p *program) addSection(tag int32, parts []*part, size int) {
	p.tags = append(p.tags, tag)
	p.parts = append(p.parts, parts...)
	p.ends = append(p.ends, len(p.parts))
	p.size += size
}

// verifyStates makes the function report the states each granted unit
// left, for tests to compare with the replay bit for bit.
var verifyStates = false

// Bounds of programs, whose indexes are uint16: a tag's parts are
// gathered into a section up to maxProgramItems items, and sections into
// a program up to maxMergedItems; an independent call's members on one
// tag are split into parts of at most maxProgramItems; an atomic call may
// have at most maxAtomicItems items on one tag.
const (
	maxProgramItems = 4096
	maxMergedItems  = 4 * maxProgramItems
	maxAtomicItems  = 1 << 15
)

// errTooBig: an atomic call has more requests on one tag than a program
// can carry (repeats of one bucket count each).
var errTooBig = fmt.Errorf("%w: redislimit: an all-or-nothing call has more than %d requests in one slot", ratelimit.ErrTooLarge, maxAtomicItems)

func (p *program) reset() {
	clear(p.keys)
	clear(p.keyIdx)
	clear(p.lims)
	clear(p.parts)
	p.keys, p.lims, p.parts, p.tags, p.ends = p.keys[:0], p.lims[:0], p.parts[:0], p.tags[:0], p.ends[:0]
	p.nItems, p.nUnits, p.size = 0, 0, 0
	p.limBuf, p.itBuf, p.secBuf, p.unBuf = p.limBuf[:0], p.itBuf[:0], p.secBuf[:0], p.unBuf[:0]
}

// key returns k's index, adding it.
func (p *program) key(k string) uint16 {
	if i, ok := p.keyIdx[k]; ok {
		return i
	}
	p.keys = append(p.keys, k)
	i := uint16(len(p.keys))
	p.keyIdx[k] = i
	return i
}

func (p *program) limit(l *bucket.Limit) uint16 {
	for i, x := range p.lims {
		if x == l {
			return uint16(i + 1)
		}
	}
	p.lims = append(p.lims, l)
	p.limBuf = appendLimit(p.limBuf, l)
	return uint16(len(p.lims))
}

// appendLimit appends l as the function reads a limit.
func appendLimit(b []byte, l *bucket.Limit) []byte {
	us, rem := 0.0, 0.0
	if l.Kind == bucket.FixedWindow {
		us, rem = split(l.Period)
	}
	b = append(b, byte(l.Kind))
	return f64s(b, l.Rate, float64(l.Period), l.Capacity, l.MaxReserved, us, rem)
}

// item adds item i of part pt's job and returns its index.
func (p *program) item(pt *part, i int32) uint16 {
	it := &pt.j.c.Items[i]
	k := p.key(pt.j.keys[i])
	l := p.limit(it.Lim)
	us, rem := split(it.Phase)
	p.itBuf = binary.LittleEndian.AppendUint16(p.itBuf, k)
	p.itBuf = binary.LittleEndian.AppendUint16(p.itBuf, l)
	p.itBuf = f64s(p.itBuf, us, rem)
	p.nItems++
	return uint16(p.nItems)
}

// size is how many items pt adds.
func (pt *part) size() int {
	j := pt.j
	switch pt.kind {
	case unitDecide:
		n := 0
		for _, d := range j.dms[pt.lo:pt.hi] {
			n++
			if d.b >= 0 {
				n++
			}
		}
		return n
	case unitSettle:
		return int(pt.hi - pt.lo)
	}
	return int(pt.hi - pt.lo)
}

// encode encodes pt's units.
func (p *program) encode(pt *part) {
	j := pt.j
	switch pt.kind {
	case unitDecide:
		hk := uint16(0)
		if pt.hold != "" {
			hk = p.key(pt.hold)
		}
		ms := j.dms[pt.lo:pt.hi]
		if pt.atomic {
			p.unit(unitDecide, len(ms), hk)
		}
		for k := range ms {
			if !pt.atomic {
				p.unit(unitDecide, 1, 0)
			}
			p.member(pt, &ms[k])
		}
	case unitPeek, unitReset:
		its := j.its[pt.lo:pt.hi]
		p.unit(pt.kind, len(its), 0)
		for _, i := range its {
			p.unBuf = binary.LittleEndian.AppendUint16(p.unBuf, p.item(pt, i))
		}
	case unitSettle:
		es := j.ses[pt.lo:pt.hi]
		p.unit(unitSettle, len(es), p.key(pt.hold))
		for _, e := range es {
			p.unBuf = binary.LittleEndian.AppendUint16(p.unBuf, p.item(pt, e.item))
			p.unBuf = appendState(p.unBuf, e.expectP, e.expect)
			p.unBuf = appendState(p.unBuf, e.targetP, e.target)
			p.unBuf = f64s(p.unBuf, e.amount)
		}
	}
}

func (p *program) unit(kind uint8, n int, holdKey uint16) {
	p.nUnits++
	p.unBuf = append(p.unBuf, kind)
	p.unBuf = binary.LittleEndian.AppendUint16(p.unBuf, uint16(n))
	p.unBuf = binary.LittleEndian.AppendUint16(p.unBuf, holdKey)
}

func (p *program) member(pt *part, d *dmember) {
	m := &pt.j.c.Members[d.m]
	a := p.item(pt, d.a)
	b := uint16(0)
	if d.b >= 0 {
		b = p.item(pt, d.b)
	}
	p.unBuf = append(p.unBuf, byte(m.Op), b2u(m.Reserve), d.role)
	p.unBuf = binary.LittleEndian.AppendUint16(p.unBuf, a)
	p.unBuf = binary.LittleEndian.AppendUint16(p.unBuf, b)
	p.unBuf = f64s(p.unBuf, m.Count)
	if d.role == rolePair {
		us, rem := split(d.other.TS)
		atUs, atRem := split(d.otherAt)
		p.unBuf = f64s(p.unBuf, d.other.Value, us, rem, atUs, atRem, d.held)
		p.unBuf = append(p.unBuf, b2u(d.otherIsA))
	}
}

// build encodes p's parts and assembles the program with its sections'
// keys.
func (p *program) build(ks *keyspace, clientClock bool, sweep int, holdMs float64) []byte {
	if !clientClock {
		sweep = 0
	}
	for _, tag := range p.tags {
		exp := uint16(0)
		drop := p.key(ks.drop[tag])
		if clientClock {
			exp = p.key(ks.expiry[tag])
		}
		p.secBuf = binary.LittleEndian.AppendUint16(p.secBuf, drop)
		p.secBuf = binary.LittleEndian.AppendUint16(p.secBuf, exp)
		p.secBuf = binary.LittleEndian.AppendUint16(p.secBuf, 0) // its units, below
	}
	for _, pt := range p.parts {
		if pt.hold != "" {
			p.key(pt.hold)
		}
	}
	b0 := len(p.keys) + 1
	lo := 0
	for k, end := range p.ends {
		before := p.nUnits
		for _, pt := range p.parts[lo:end] {
			p.encode(pt)
		}
		binary.LittleEndian.PutUint16(p.secBuf[6*k+4:], uint16(p.nUnits-before))
		lo = end
	}
	b := p.out[:0]
	for _, v := range []int{len(p.lims), p.nItems, len(p.tags), b0, len(p.keys) + 1 - b0, sweep, int(b2u(verifyStates))} {
		b = binary.LittleEndian.AppendUint16(b, uint16(v))
	}
	b = f64s(b, holdMs)
	b = append(b, p.limBuf...)
	b = append(b, p.itBuf...)
	b = append(b, p.secBuf...)
	b = append(b, p.unBuf...)
	p.out = b
	return b
}

func f64s(b []byte, vs ...float64) []byte {
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
	}
	return b
}

func appendState(b []byte, present bool, s bucket.State) []byte {
	us, rem := split(s.TS)
	b = append(b, b2u(present))
	return f64s(b, s.Value, us, rem)
}

func b2u(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// reply reads a function's reply.
type reply struct {
	b   []byte
	off int
	err error
}

var errReply = errors.New("redislimit: unexpected reply from the function")

func (r *reply) byte1() uint8 {
	if r.err != nil || r.off+1 > len(r.b) {
		r.fail()
		return 0
	}
	r.off++
	return r.b[r.off-1]
}

func (r *reply) f64() float64 {
	if r.err != nil || r.off+8 > len(r.b) {
		r.fail()
		return 0
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(r.b[r.off:]))
	r.off += 8
	return v
}

func (r *reply) time() int64 {
	us, rem := r.f64(), r.f64()
	t, ok := join(us, rem)
	if !ok {
		r.fail()
	}
	return t
}

// state reads a prior state: present, value, ts.
func (r *reply) state() (bucket.State, bool) {
	p := r.byte1()
	v := r.f64()
	ts := r.time()
	if p > 1 || math.IsNaN(v) {
		r.fail()
	}
	return bucket.State{Value: v, TS: ts}, p == 1
}

func (r *reply) fail() {
	if r.err == nil {
		r.err = fmt.Errorf("%w (at byte %d of %d)", errReply, r.off, len(r.b))
	}
}
