package actor

import "github.com/seed7fbd42b6/ratelimit/internal/bucket"

// These methods are for functions passed to Group.Run, which execute on the
// partition's own goroutine.

// Len is the number of buckets the partition holds in memory.
func (p *Partition) Len() int { return p.buckets.len() }

// Sweep drops every bucket that has refilled to full by now (a full bucket
// equals an absent one; its last record projects to full too) and visits the
// others, if visit is not nil. It returns how many it dropped. Buckets of an
// unknown limit (recovered, never touched since) are kept.
func (p *Partition) Sweep(now int64, visit func(BucketID, bucket.State)) (dropped int) {
	p.last = max(p.last, now)       // see processAt
	p.dropped = max(p.dropped, now) // see loadItem
	t := &p.buckets
	t.moves++
	// Deleting an entry whose hash has overflow entries promotes one of
	// them, which the scan may or may not visit: with overflow entries
	// around, delete afterwards. Without (the normal case), delete at once
	// rather than collect what may be millions of buckets.
	type doomed struct {
		tag uint64
		id  BucketID
	}
	var later []doomed
	promote := len(t.overflow) > 0
	t.each(0, func(s *subtable, j int) {
		s.scan(func(tag uint64, e *entry) bool {
			switch {
			case !p.drops(e, now):
				if visit != nil {
					visit(e.id, e.s)
				}
				return false
			case promote:
				later = append(later, doomed{tag, e.id})
				return false
			}
			dropped++
			t.n--
			return true
		})
		if !promote {
			t.shrink(s, j)
		}
	})
	for id, o := range t.overflow {
		if p.drops(&o.e, now) {
			delete(t.overflow, id)
			dropped++
		} else if visit != nil {
			visit(id, o.e.s)
		}
	}
	for _, d := range later {
		t.delTag(d.tag, d.id)
		dropped++
	}
	return dropped
}

// SweepSome is Sweep without visiting, bounded: it examines whole
// subtables (at most ~3k buckets each), starting where the previous call
// stopped, until it has examined at least budget buckets or every
// subtable once, and reports how many it dropped and examined. Repeated
// calls reclaim full buckets, and shrink what they empty, without holding
// the partition for long.
func (p *Partition) SweepSome(now int64, budget int) (dropped, examined int) {
	p.last = max(p.last, now)       // see processAt
	p.dropped = max(p.dropped, now) // see loadItem
	t := &p.buckets
	t.moves++
	if len(t.overflow) > 0 {
		n := t.len()                // examined: all of them (Sweep)
		return p.Sweep(now, nil), n // rare: keep promotion exact
	}
	for covered := 0; covered < len(t.dir) && examined < budget; {
		if t.cursor >= len(t.dir) {
			t.cursor = 0
		}
		s := t.dir[t.cursor]
		start, width := t.span(t.cursor, s.depth)
		examined += s.scan(func(_ uint64, e *entry) bool {
			if p.drops(e, now) {
				dropped++
				t.n--
				return true
			}
			return false
		})
		t.shrink(s, start)
		t.cursor, covered = start+width, covered+width
	}
	return dropped, examined
}

// drops reports whether e has refilled by now, so that a sweep drops it
// (it equals an absent bucket), and then raises p.dropped to its stamp if
// that is later (the clock went back since; see loadItem).
func (p *Partition) drops(e *entry, now int64) bool {
	if e.lim == nil || !e.lim.Full(e.s, now) {
		return false
	}
	p.dropped = max(p.dropped, e.s.TS)
	return true
}
