package actor

import "github.com/seed7fbd42b6/ratelimit/bucket"

// These methods are for functions passed to Group.Run, which execute on the
// partition's own goroutine.

// Len is the number of buckets the partition holds in memory.
func (p *Partition) Len() int { return p.buckets.len() }

// Sweep drops every bucket that has refilled to full by now (a full bucket
// equals an absent one; its last record projects to full too) and visits the
// others, if visit is not nil. It returns how many it dropped. Buckets of an
// unknown limit (recovered, never touched since) are kept.
func (p *Partition) Sweep(now int64, visit func(BucketID, bucket.State)) (dropped int) {
	// Deleting a main entry may promote an overflow entry into main while
	// main is iterated (which may or may not visit it): with overflow
	// entries around, delete afterwards. Without (the normal case), delete
	// at once rather than collect what may be millions of buckets.
	promote := len(p.buckets.overflow) > 0
	var full []ovEntry
	for h, e := range p.buckets.main {
		if e.lim != nil && e.lim.Full(e.s, now) {
			if promote {
				full = append(full, ovEntry{h, e})
			} else {
				delete(p.buckets.main, h)
				dropped++
			}
		} else if visit != nil {
			visit(e.id, e.s)
		}
	}
	for id, o := range p.buckets.overflow {
		if o.e.lim != nil && o.e.lim.Full(o.e.s, now) {
			delete(p.buckets.overflow, id)
			dropped++
		} else if visit != nil {
			visit(id, o.e.s)
		}
	}
	for _, o := range full {
		p.buckets.del(o.h, o.e.id)
		dropped++
	}
	return dropped
}

// SweepSome is Sweep without visiting, bounded: it examines at most budget
// buckets, starting where Go's map iteration happens to start (a random
// place), and reports how many it dropped and examined. Repeated calls
// reclaim full buckets without holding the partition for long; they need not
// cover every bucket every time (a full bucket that stays costs only memory
// until a later pass or the next snapshot drops it).
func (p *Partition) SweepSome(now int64, budget int) (dropped, examined int) {
	if len(p.buckets.overflow) > 0 {
		return p.Sweep(now, nil), p.buckets.len() // rare: keep promotion exact
	}
	for h, e := range p.buckets.main {
		if examined == budget {
			break
		}
		examined++
		if e.lim != nil && e.lim.Full(e.s, now) {
			delete(p.buckets.main, h)
			dropped++
		}
	}
	return dropped, examined
}
