package actor

import "github.com/seed7fbd42b6/ratelimit/internal/bucket"

// Relimit sets the limit of every bucket the partition holds to
// limit(id, current), for a function passed to Group.Run when the limits
// change at run time to generation gen (above every earlier one): sweeps
// then judge a bucket full by its new limit. A nil limit keeps the bucket
// but never drops it as full (as for a bucket recovered under an unknown
// limit). Calls made under an older generation (so of a named limit) that
// store afterwards store their buckets under named(id) (see Item.Gen).
func (p *Partition) Relimit(gen uint64, limit func(id BucketID, current *bucket.Limit) *bucket.Limit, named func(BucketID) *bucket.Limit) {
	p.limGen, p.relimit = gen, named
	t := &p.buckets
	t.each(0, func(s *subtable, _ int) {
		for i, tag := range s.tags {
			if tag != 0 {
				e := &s.ents[i]
				e.lim = limit(e.id, e.lim)
			}
		}
	})
	for id, o := range t.overflow {
		o.e.lim = limit(id, o.e.lim)
		t.overflow[id] = o
	}
}
