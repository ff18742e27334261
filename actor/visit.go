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
