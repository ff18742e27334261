package redislimit

import (
	"errors"
	"fmt"

	"github.com/seed7fbd42b6/ratelimit/internal/actor"
	"github.com/seed7fbd42b6/ratelimit/internal/bucket"
)

// errDisagree: the function's decision differs from the same arithmetic
// replayed here on the states it reported. The call fails closed.
var errDisagree = errors.New("redislimit: the Redis function and package bucket disagree on a decision")

// readPart reads pt's share of a reply: the prior states of its items and
// the statuses of its units, and replays its decisions here (package
// bucket's exact arithmetic fills each member's RetryAfter, Left and
// UntilFull). It touches nothing but pt and its call's items and members.
func (s *redisStore) readPart(pt *part, rd *reply) {
	j := pt.j
	switch pt.kind {
	case unitDecide:
		if j.tp.on {
			j.readStep(pt, rd)
			return
		}
		if pt.atomic {
			st := rd.byte1()
			j.readPriors(rd, pt)
			if rd.err != nil {
				return
			}
			if j.decideAtomic(pt) != (st == 1) || st > 1 {
				pt.err = errDisagree
			} else if st == 1 && verifyStates {
				j.verify(pt, rd, j.dms[pt.lo:pt.hi])
			}
			return
		}
		for k := pt.lo; k < pt.hi; k++ {
			d := j.dms[k]
			st := rd.byte1()
			j.readPrior(rd, d.a)
			if rd.err != nil {
				return
			}
			mem := &j.c.Members[d.m]
			j.decideMember(mem, d.a, -1, pt.now)
			if mem.OK != (st == 1) || st > 1 {
				pt.err = errDisagree
			} else if st == 1 && verifyStates {
				j.verify(pt, rd, j.dms[k:k+1])
			}
		}
	case unitPeek:
		pt.status = rd.byte1()
		for _, i := range j.its[pt.lo:pt.hi] {
			j.readPrior(rd, i)
		}
	case unitReset, unitSettle:
		pt.status = rd.byte1()
	}
}

// readPriors reads the prior states of pt's members' buckets, in order.
func (j *job) readPriors(rd *reply, pt *part) {
	for _, d := range j.dms[pt.lo:pt.hi] {
		j.readPrior(rd, d.a)
		if d.b >= 0 {
			j.readPrior(rd, d.b)
		}
	}
}

// readPrior sets item i's state to the prior state read.
func (j *job) readPrior(rd *reply, i int32) {
	j.c.Items[i].State, j.present[i] = rd.state()
}

// decideAtomic replays an atomic part's members in order, each seeing the
// grants before it, and reports whether all were granted; if not, nothing
// is marked Write.
func (j *job) decideAtomic(pt *part) bool {
	c := j.c
	ds := j.dms[pt.lo:pt.hi]
	for _, d := range ds {
		c.Items[d.a].Write = false
		if d.b >= 0 {
			c.Items[d.b].Write = false
		}
	}
	prior := j.repeatPriors(ds)
	all := true
	for _, d := range ds {
		mem := &c.Members[d.m]
		j.decideMember(mem, d.a, d.b, pt.now)
		all = all && mem.OK
	}
	if !all && prior != nil {
		j.repeatsWait(ds, prior, pt.now)
	}
	if !all {
		for _, d := range ds {
			c.Items[j.canon[d.a]].Write = false
			if d.b >= 0 {
				c.Items[j.canon[d.b]].Write = false
			}
		}
	}
	return all
}

// repeatPriors is the states of c's items before ds's members are
// replayed, when two of them name one bucket (see actor.RepeatsWait), and
// nil otherwise.
func (j *job) repeatPriors(ds []dmember) []bucket.State {
	for _, d := range ds {
		if j.canon[d.a] != d.a || d.b >= 0 && j.canon[d.b] != d.b {
			return j.c.States()
		}
	}
	return nil
}

// repeatsWait raises the call's Wait to when ds's members, replayed from
// prior, are all granted (actor.RepeatsWait).
func (j *job) repeatsWait(ds []dmember, prior []bucket.State, now int64) {
	ms := make([]int32, len(ds))
	for i, d := range ds {
		ms[i] = d.m
	}
	w := actor.RepeatsWait(j.c, ms, func(i int32) int32 { return j.canon[i] }, prior, now)
	j.c.Wait = max(j.c.Wait, w)
}

// finishPart reports pt's error on its items, counts its decisions and
// finishes it.
func (s *redisStore) finishPart(pt *part) {
	j := pt.j
	c := j.c
	switch {
	case pt.err != nil:
		switch pt.kind {
		case unitDecide:
			for _, d := range j.dms[pt.lo:pt.hi] {
				c.Items[d.a].Err = pt.err
				if d.b >= 0 {
					c.Items[d.b].Err = pt.err
				}
			}
		case unitPeek, unitReset:
			for _, i := range j.its[pt.lo:pt.hi] {
				c.Items[i].Err = pt.err
			}
		}
	case pt.kind != unitDecide || j.tp.on:
	case pt.atomic:
		if writes(c) {
			s.count(c)
		}
	default:
		for _, d := range j.dms[pt.lo:pt.hi] {
			s.countMember(&c.Members[d.m])
		}
	}
	j.partDone()
}

// count adds an atomic call's outcome, one decision, as the partitions
// count it.
func (s *redisStore) count(c *actor.Call) {
	wait := false
	for i := range c.Members {
		if !c.Members[i].OK {
			s.denials.Add(1)
			return
		}
		wait = wait || c.Members[i].RetryAfter > 0
	}
	s.grants.Add(1)
	if wait {
		s.reservations.Add(1)
	}
}

// countMember adds one independent member's outcome.
func (s *redisStore) countMember(m *actor.Member) {
	switch {
	case m.Op != actor.OpTake:
	case !m.OK:
		s.denials.Add(1)
	case m.RetryAfter > 0:
		s.grants.Add(1)
		s.reservations.Add(1)
	default:
		s.grants.Add(1)
	}
}

// verify reads the states a granted unit left its members' items in
// (verifyStates) and fails pt unless the replay left the same, bit for
// bit.
func (j *job) verify(pt *part, rd *reply, ds []dmember) {
	for _, d := range ds {
		for _, i := range [2]int32{d.a, d.b} {
			if i < 0 {
				continue
			}
			s, present := rd.state()
			it := &j.c.Items[j.canon[i]]
			want := j.present[j.canon[i]]
			if it.Write {
				want = !it.Lim.Full(it.State, pt.now)
			}
			if present != want || present && s != it.State {
				pt.err = fmt.Errorf("%w: %s holds %+v (present %v), replay %+v (present %v)", errDisagree, j.keys[i], s, present, it.State, want)
			}
		}
	}
}
