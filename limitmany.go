package ratelimit

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/seed7fbd42b6/ratelimit/internal/actor"
)

// LimitMany decides each request independently, as Limit would, but hands
// them to the partitions together: for callers that decide many things at
// once (a game tick, a queue consumer) it costs far less per request. It
// appends one Decision per request to out[:0] and returns it; reuse out to
// avoid allocating.
// Requests on sharded limits (two partitions each) are decided one by one
// after the batch, as Limit would, so they do not share its savings.
func (l *Limiter) LimitMany(ctx context.Context, rs []Request, out []Decision) []Decision {
	out = out[:0]
	if err := l.usable(ctx); err != nil {
		for range rs {
			out = append(out, Decision{Err: err})
		}
		return out
	}
	g := l.holdGate()
	if g.n != nil { // a shared store: see callGate
		defer g.drop()
	}
	c := actor.NewCall()
	g.hand(c) // held until the store is done with c
	sc := manyPool.Get().(*manyScratch)
	defer manyPool.Put(sc)
	sc.reset(l.store.Partitions())
	sharded := false
	sc.touch = touchKeys(rs)
	var d *limitDef          // the previous request's limit: batches mostly repeat one
	named := l.limits.Load() // one generation for every request (see resolveIn)
	for i := range rs {
		r := &rs[i]
		err := checkKey(r.Key)
		if err == nil && (d == nil || r.Config != nil || r.Name != d.name || d.inline) {
			d, err = l.resolveIn(named, r.Name, r.Config)
		}
		var n float64
		if err == nil {
			n, err = d.count(r.Count, r.Reserve)
		}
		switch {
		case err != nil:
			out = append(out, Decision{Err: err})
			d = nil
		case d.shards > 1: // spans two partitions: decided one by one below
			out = append(out, Decision{Status: Status{Limit: d.name}, Err: errLater})
			sharded = true
		default:
			out = append(out, Decision{Status: Status{Limit: d.name}})
			h := l.hashKey(d, r.Key)
			part := l.store.Route(h.route, 0)
			sc.add(h, part, int32(i))
			c.Members = append(c.Members, actor.Member{Op: r.op(), Count: n, Reserve: r.Reserve, Second: -1, Def: d})
		}
	}
	// Place the items grouped by partition, in request order within each.
	sc.prefix()
	c.SetItems(len(c.Members))
	for m := range c.Members {
		d := c.Members[m].Def.(*limitDef)
		part := sc.part[m]
		pos := sc.next[part]
		sc.next[part]++
		it := c.SetItem(pos, int32(m))
		l.setItem(it, d, rs[sc.req[m]].Key, sc.hash[m], 0)
		c.Members[m].First = pos
	}
	if len(c.Members) > 0 {
		abandoned, err := l.store.Decide(ctx, c)
		if err != nil {
			for i := range out {
				if out[i].Err == nil || out[i].Err == errLater {
					out[i].Err = err
				}
			}
			if !abandoned {
				c.Release()
			}
			return out
		}
	}
	m := 0
	for i := range out {
		if out[i].Err != nil {
			continue
		}
		if err := l.itemErr(c.ItemErr(m)); err != nil {
			out[i].Err = err
		} else {
			c.Members[m].Def.(*limitDef).fill(&out[i].Status, &c.Members[m])
		}
		m++
	}
	c.Release()
	if sharded {
		for i := range out {
			if out[i].Err == errLater {
				out[i].Status, out[i].Err = l.Limit(ctx, rs[i])
			}
		}
	}
	return out
}

// touchKeys loads the first byte of every key, and returns them summed so
// the loads are kept: the keys' cache misses then overlap, instead of
// each hash below waiting for its own.
func touchKeys(rs []Request) (sum byte) {
	for i := range rs {
		if k := rs[i].Key; len(k) > 0 {
			sum += k[0]
		}
	}
	return sum
}

// manyScratch is LimitMany's per-call working memory, pooled.
type manyScratch struct {
	touch byte // touchKeys' sum, kept so the loads are not dropped
	hash  []keyHashes
	part  []int32
	req   []int32 // request index of each member
	next  []int32 // per partition: the next free item index
}

var manyPool = sync.Pool{New: func() any { return new(manyScratch) }}

func (s *manyScratch) reset(parts int) {
	s.hash, s.part, s.req = s.hash[:0], s.part[:0], s.req[:0]
	s.next = slices.Grow(s.next[:0], parts)[:parts]
	clear(s.next)
}

// add records a member's hash and partition, counting it in next.
func (s *manyScratch) add(h keyHashes, part, req int32) {
	s.hash = append(s.hash, h)
	s.part = append(s.part, part)
	s.req = append(s.req, req)
	s.next[part]++
}

// prefix turns next's per-partition counts into each partition's first
// item index.
func (s *manyScratch) prefix() {
	var sum int32
	for p, n := range s.next {
		s.next[p] = sum
		sum += n
	}
}

// errLater marks, inside LimitMany, a request decided after the batch.
var errLater = errors.New("decided later")
