package ratelimit

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/seed7fbd42b6/ratelimit/internal/actor"
	"github.com/seed7fbd42b6/ratelimit/internal/bucket"
)

// LimitAll asks every request at once: all are granted or none is, never
// over any limit, and concurrent calls cannot deadlock. A request with
// CheckOnly set is decided with the others (if it is denied, so is the
// call) but takes nothing. RetryAfter is the latest of the requests' (of
// the denied ones, for a denial); where requests name one bucket several
// times, a denial's is when each of them is granted after the ones before
// it, if nothing else changes the bucket (for a sharded limit, each
// request's own: an estimate, since the shards a request draws are
// random). Limit, Remaining and ResetAfter are
// those of the denied request with the latest RetryAfter, or, for a grant,
// of the request left with the fewest tokens. A bad request makes the
// whole call an error with nothing taken. Requests naming one bucket
// several times are decided in order; if they could never be granted
// together it is ErrInvalidCount, and if they give its limit two
// different configs, ErrInvalidConfig.
func (l *Limiter) LimitAll(ctx context.Context, rs ...Request) (Status, error) {
	st, _, err := l.limitAll(ctx, rs, nil, false)
	return st, err
}

// LimitAllStatuses is LimitAll that also reports each request's own part
// of the decision: each[i] (appended to each[:0]; reuse it to avoid
// allocating) is request i's status as decided in order within the call.
// Its OK says whether its part could be granted after the parts before
// it; when the call as a whole is denied nothing was taken, and the
// Remaining of a part that could be granted is what it would have left.
func (l *Limiter) LimitAllStatuses(ctx context.Context, rs []Request, each []Status) (Status, []Status, error) {
	return l.limitAll(ctx, rs, each[:0], true)
}

func (l *Limiter) limitAll(ctx context.Context, rs []Request, each []Status, report bool) (Status, []Status, error) {
	if err := l.usable(ctx); err != nil {
		return Status{}, each, err
	}
	g := l.holdGate()
	if g.n != nil { // a shared store: see callGate
		defer g.drop()
	}
	if len(rs) == 0 {
		return Status{OK: true}, each, nil
	}
	c := actor.NewCall()
	c.Atomic = true
	g.hand(c) // held until the store is done with c
	defs := make([]*limitDef, len(rs))
	named := l.limits.Load()        // one generation for every request (see resolveIn)
	var latest map[string]*limitDef // each name's latest inline config in this call, which others may change meanwhile
	for i := range rs {
		r := &rs[i] // not a copy: the caller has just written rs
		err := checkKey(r.Key)
		var d *limitDef
		if err == nil {
			d, err = l.resolveIn(named, r.Name, r.Config)
		}
		if err == nil && d.inline {
			if prev, ok := latest[r.Name]; ok && r.Config == nil {
				d = prev
			} else { // the name's latest inline config, from here on in this call
				if latest == nil {
					latest = make(map[string]*limitDef)
				}
				latest[r.Name] = d
			}
		}
		if err == nil {
			var n float64
			if n, err = d.count(r.Count, r.Reserve); err == nil {
				defs[i] = d
				l.addMember(c, d, r.Key, r.op(), n, r.Reserve)
				continue
			}
		}
		c.Release()
		return Status{}, each, fmt.Errorf("request %d: %w", i, err)
	}
	if err := repeatsFit(rs, defs, c.Members); err != nil {
		c.Release()
		return Status{}, each, err
	}
	if abandoned, err := l.store.Decide(ctx, c); err != nil {
		if !abandoned {
			c.Release()
		}
		return Status{}, each, err
	}
	defer c.Release()
	if err := l.itemErr(c.FirstErr()); err != nil {
		return Status{}, each, err
	}
	granted := true
	for i := range c.Members {
		granted = granted && c.Members[i].OK
	}
	var st Status
	chosen := false                 // st is a member's status ("" names a limit too)
	denied := time.Duration(c.Wait) // a denial's RetryAfter: see actor.Member.InWait
	for i := range c.Members {
		var ms Status
		defs[i].fill(&ms, &c.Members[i])
		if report {
			each = append(each, ms)
		}
		if !ms.OK && !c.Members[i].InWait {
			denied = max(denied, ms.RetryAfter)
		}
		switch {
		case granted:
			wait := max(st.RetryAfter, ms.RetryAfter)
			if !chosen || ms.Remaining < st.Remaining {
				st, chosen = ms, true
			}
			st.RetryAfter = wait
		case !ms.OK && (!chosen || ms.RetryAfter > st.RetryAfter):
			st, chosen = ms, true
		}
	}
	if !granted {
		st.RetryAfter = denied // when every member is granted, each after the ones before it
	}
	st.OK = granted
	return st, each, nil
}

// repeatsFit checks a LimitAll that names one bucket (name and key)
// several times. The requests must agree on its config: two different
// ones for the same buckets in one call are ErrInvalidConfig. And they
// must be able to succeed together, or the call is ErrInvalidCount, not a
// denial whose RetryAfter never comes true. Members are decided in order,
// so for an unsharded bucket this replays them on a full bucket, which is
// the best any time can offer (reserve 1 then take 10 of a 10-token
// bucket never fits; take 10 then reserve 1 does); a CheckOnly request
// must fit where it stands but takes nothing. For a sharded limit,
// whose shards are drawn at random, only the total is checked against
// every shard's worth.
func repeatsFit(rs []Request, defs []*limitDef, ms []actor.Member) error {
	var buf [pairwiseRepeats]int
	next := repeatChains(rs, defs, buf[:0])
	for i := range rs {
		if next[i] < 0 { // no repeat after it, or a repeat already checked
			continue
		}
		d := defs[i]
		state := bucket.State{Value: d.perShard.Capacity} // full: the best case
		total, fits, reserve := 0.0, true, false
		for j := i; j >= 0; j, next[j] = next[j], checked {
			if !d.sameBuckets(defs[j]) {
				return fmt.Errorf("%w: requests %d and %d give limit %q two different configs", ErrInvalidConfig, i, j, d.name)
			}
			if !rs[j].CheckOnly {
				total += ms[j].Count
			}
			reserve = reserve || rs[j].Reserve
			if d.shards == 1 && fits {
				dec := d.perShard.Take(state, 0, ms[j].Count, rs[j].Reserve)
				fits = dec.OK
				if !rs[j].CheckOnly {
					state = dec.Next
				}
			}
		}
		most := d.perShard.MaxCount(reserve) * float64(d.shards)
		if !fits || total > most {
			return fmt.Errorf("%w: %v tokens asked of %q/%q in one call, which it can never grant together (at most %v, in this order)",
				ErrInvalidCount, total, d.name, rs[i].Key, most)
		}
	}
	return nil
}

// checked marks, in repeatChains' result, a request whose chain has been
// walked.
const checked = -2

// pairwiseRepeats is the most requests repeatChains compares pair by
// pair, with no allocation; beyond, a map.
const pairwiseRepeats = 32

// repeatChains links the requests of rs that name one bucket (limit name
// and key): next[i] is the next request after i naming its bucket, -1 if
// none. next is buf, grown to len(rs). The work is linear in len(rs)
// (a map) beyond a few requests, so that a large call costs no more per
// request than a small one.
func repeatChains(rs []Request, defs []*limitDef, buf []int) []int {
	next := slices.Grow(buf[:0], len(rs))[:len(rs)]
	if len(rs) <= pairwiseRepeats {
		for i := range rs {
			next[i] = -1
			for j := i + 1; j < len(rs); j++ {
				if defs[j].name == defs[i].name && rs[j].Key == rs[i].Key {
					next[i] = j
					break
				}
			}
		}
		return next
	}
	type bucketOf struct{ name, key string }
	last := make(map[bucketOf]int, len(rs))
	for i := range rs {
		next[i] = -1
		b := bucketOf{defs[i].name, rs[i].Key}
		if j, ok := last[b]; ok {
			next[j] = i
		}
		last[b] = i
	}
	return next
}
