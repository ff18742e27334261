package engine

import (
	"context"
	"math"
	"time"

	"github.com/seed7fbd42b6/ratelimit"
)

// run decides the pending parts: one all-or-nothing call, and again
// without the parts a denial was due to when none of them may deny the
// request (see the package doc), until the request is granted or denied.
func (e *Engine) run(ctx context.Context, res *Result, s *scratch) error {
	quotas, quotasOver := 0, 0
	hard := false // the request is denied whatever the limiter says
	for k := range s.parts {
		p := &s.parts[k]
		if p.quota {
			quotas++
		}
		if p.state == over && e.overDenies(p, res, &quotasOver) {
			hard = true
		}
	}
	hard = hard || quotas > 0 && quotasOver == quotas
	redone := false  // the last call re-checked parts of a denied call (redoRepeats)
	retried := false // the request was decided again after a re-check
	for {
		s.rs, s.sent = s.rs[:0], s.sent[:0]
		for k := range s.parts {
			p := &s.parts[k]
			if p.state != pending || p.follows >= 0 {
				continue
			}
			r := p.req
			if hard && !r.CheckOnly { // only the statuses are wanted: checked as a take would be decided
				r.CheckOnly, r.Count = true, e.checkCount(r, p.prior+p.own, p.own)
			}
			s.rs = append(s.rs, r)
			s.sent = append(s.sent, k)
		}
		granted := true
		if len(s.rs) > 0 {
			var err error
			if granted, err = e.call(ctx, s); err != nil {
				return err
			}
		}
		if granted && !hard {
			e.finishGrant(res, s)
			return nil
		}
		if redone && !retried && granted && !s.anyOver() {
			// The re-check, a later call, found every part within its
			// limit (the bucket refilled since the denial): decide the
			// request again, once, rather than deny it with nothing over.
			hard, redone, retried = false, false, true
			continue
		}
		if !hard {
			progress, repeats := false, false
			for j, k := range s.sent {
				p := &s.parts[k]
				repeats = repeats || p.prior > 0
				if s.each[j].OK {
					continue
				}
				progress = true
				if p.zero && s.each[j].Remaining >= 0 {
					p.state = within
					res.Statuses[p.st].Remaining = s.each[j].Remaining
					e.setTimes(&res.Statuses[p.st], s.each[j], p)
					res.Statuses[p.st].RetryAfter = 0
					continue
				}
				p.state = over
				e.setTimes(&res.Statuses[p.st], s.each[j], p)
				res.Statuses[p.st].Remaining = s.each[j].Remaining
				if e.overDenies(p, res, &quotasOver) {
					hard = true
				}
			}
			hard = hard || !progress || quotas > 0 && quotasOver == quotas
			if !hard {
				continue // again without the parts just decided
			}
			if repeats && !redone {
				// The call decided its parts in order, each after the takes
				// of those before it that were granted: a later part on a
				// bucket named before may have fit without an earlier one's
				// hits. Check them again as hard mode does, counting those.
				s.redoRepeats(res, &quotasOver)
				redone = true
				continue
			}
		}
		e.finishDenial(res, s, quotas)
		return nil
	}
}

// checkCount is the count to check r with to report it as a take after
// the parts before it: total, their hits and its own, unless no single
// request of total can be granted (more than two shards of a sharded
// limit hold, though the bucket as a whole may), then its own.
func (e *Engine) checkCount(r ratelimit.Request, total, own float64) float64 {
	r.Count = total
	if ok, err := e.lim.Grantable(r); err == nil && !ok {
		return own
	}
	return total
}

// anyOver reports whether a part is over its limit (shadow_mode parts
// aside): decided so earlier, or in the last call.
func (s *scratch) anyOver() bool {
	for k := range s.parts {
		if p := &s.parts[k]; p.state == over && !p.shadow {
			return true
		}
	}
	for j, k := range s.sent {
		if p := &s.parts[k]; !s.each[j].OK && !p.shadow && !(p.zero && s.each[j].Remaining >= 0) {
			return true
		}
	}
	return false
}

// redoRepeats returns the parts of the last call that follow another part
// on their bucket to pending, undoing what their statuses recorded.
func (s *scratch) redoRepeats(res *Result, quotasOver *int) {
	for _, k := range s.sent {
		p := &s.parts[k]
		if p.prior == 0 || p.state != over {
			continue
		}
		if p.quota {
			*quotasOver--
		}
		p.state = pending
		st := &res.Statuses[p.st]
		st.Code, st.Shadowed, st.RetryAfter = OK, false, 0
	}
}

// call sends s.rs to the limiter, filling s.each, and reports whether
// the call was granted.
func (e *Engine) call(ctx context.Context, s *scratch) (bool, error) {
	if len(s.rs) == 1 {
		st, err := e.lim.Limit(ctx, s.rs[0]) // Limit honours CheckOnly
		s.each = append(s.each[:0], st)
		return st.OK, err
	}
	st, each, err := e.lim.LimitAllStatuses(ctx, s.rs, s.each)
	s.each = each
	return st.OK, err
}

// overDenies records that part p is over its limit and reports whether
// that alone denies the request: not for a shadow_mode rule (reported
// OK), nor for a quota_mode one (counted in quotasOver: the request is
// denied when all of them are over).
func (e *Engine) overDenies(p *part, res *Result, quotasOver *int) bool {
	st := &res.Statuses[p.st]
	switch {
	case p.shadow:
		st.Shadowed = true
		return false
	case p.quota:
		*quotasOver++
		return false
	}
	st.Code = OverLimit
	return true
}

// fullAfter is how long st's bucket, holding st.Remaining, needs to be
// full: a token bucket's ResetAfter as it stands, for a status the limiter
// reported as if its count were taken. A fixed window's stays the window's
// end (setTimes).
func fullAfter(st *Status) time.Duration {
	c := &st.Limit.Config
	if c.Kind != ratelimit.TokenBucket {
		return st.ResetAfter
	}
	capacity := c.Capacity
	if capacity == 0 {
		capacity = c.Rate
	}
	need := capacity - st.Remaining
	if !(need > 0) || !(c.Rate > 0) {
		return 0
	}
	d := math.Ceil(need / c.Rate * float64(c.Period))
	if d >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(d)
}

// setTimes copies a limiter status's waits into st, with the window's end
// as the reset time of a fixed window.
func (e *Engine) setTimes(st *Status, ls ratelimit.Status, p *part) {
	st.RetryAfter = ls.RetryAfter
	st.ResetAfter = ls.ResetAfter
	c := &st.Limit.Config
	if c.Kind == ratelimit.FixedWindow && (st.ResetAfter <= 0 || st.ResetAfter > c.Period) {
		st.ResetAfter = windowEnd(e.now(), c.Period)
	}
	if ls.OK && !p.req.Reserve {
		st.RetryAfter = 0
	}
}

// finishGrant records a granted call: every part sent was granted (and
// taken, unless a check).
func (e *Engine) finishGrant(res *Result, s *scratch) {
	for j, k := range s.sent {
		p := &s.parts[k]
		st := &res.Statuses[p.st]
		ls := s.each[j]
		st.Remaining = ls.Remaining
		e.setTimes(st, ls, p)
		if p.req.CheckOnly { // the limiter reports what a take would have left
			st.Remaining += p.req.Count
			st.ResetAfter = fullAfter(st)
		}
		p.state = within
		res.RetryAfter = max(res.RetryAfter, st.RetryAfter)
	}
	e.finishFollowers(res, s, true)
	for k := range s.parts {
		p := &s.parts[k]
		if p.state == over && !p.shadow {
			res.Statuses[p.st].Code = OverLimit // a quota part; the request passed on another
		}
	}
	res.Code = OK
}

// finishDenial records a denied request: nothing was taken, so each part
// sent reports its bucket as it is. quotas counts the request's
// quota_mode parts: when all of them are over, the request waits for the
// first to have room too.
func (e *Engine) finishDenial(res *Result, s *scratch, quotas int) {
	s.firstUses()
	for j, k := range s.sent {
		p := &s.parts[k]
		st := &res.Statuses[p.st]
		ls := s.each[j]
		st.Remaining = s.bucketNow(j)
		e.setTimes(st, ls, p)
		if ls.OK { // the limiter reports what a take would have left
			st.ResetAfter = fullAfter(st)
		}
		switch {
		case ls.OK, p.zero && ls.Remaining >= 0:
			p.state, st.RetryAfter = within, 0
		default:
			p.state = over
			if p.shadow {
				st.Shadowed = true
			} else {
				st.Code = OverLimit
			}
		}
	}
	e.finishFollowers(res, s, false)
	res.Code, res.RetryAfter = OverLimit, 0
	quotaWait, quotasOver, quotasNever, never := time.Duration(-1), 0, 0, false
	for k := range s.parts {
		p := &s.parts[k]
		st := &res.Statuses[p.st]
		if p.state != over || p.shadow {
			continue
		}
		st.Code = OverLimit
		if p.quota {
			quotasOver++
		}
		switch {
		case st.Never && p.quota: // the request may pass on another quota
			quotasNever++
		case st.Never:
			never = true
		case p.quota:
			if quotaWait < 0 || st.RetryAfter < quotaWait {
				quotaWait = st.RetryAfter
			}
		default:
			res.RetryAfter = max(res.RetryAfter, st.RetryAfter)
		}
	}
	if quotas > 0 && quotasOver == quotas && quotaWait > 0 {
		res.RetryAfter = max(res.RetryAfter, quotaWait)
	}
	if never || quotas > 0 && quotasNever == quotas { // the same request can never pass: no wait makes it
		res.RetryAfter = 0
	}
}

// bucketNow is the value of the bucket of s.rs[j] before the call: the
// first part of the call on that bucket saw it untouched. It needs
// s.first (firstUses).
func (s *scratch) bucketNow(j int) float64 {
	i := s.first[j]
	v := s.each[i].Remaining
	if s.each[i].OK {
		v += s.rs[i].Count
	}
	return v
}

// firstUses sets s.first[j] to the index of the first of s.rs on the
// bucket of s.rs[j]: pair by pair up to linearParts requests, through
// s.firsts beyond.
func (s *scratch) firstUses() {
	s.first = s.first[:0]
	if len(s.rs) <= linearParts {
		for _, r := range s.rs {
			i := 0
			for s.rs[i].Name != r.Name || s.rs[i].Key != r.Key {
				i++
			}
			s.first = append(s.first, i)
		}
		return
	}
	if s.firsts == nil {
		s.firsts = make(map[bucketRef]int, len(s.rs))
	}
	for j, r := range s.rs {
		b := bucketRef{r.Name, r.Key}
		i, ok := s.firsts[b]
		if !ok {
			i = j
			s.firsts[b] = j
		}
		s.first = append(s.first, i)
	}
}

// finishFollowers reports each zero part that follows another on its
// bucket as that part leaves it. In a granted check, which takes nothing,
// the leader reports its bucket as it stands, and the follower's code is
// judged by what the leader would leave.
func (e *Engine) finishFollowers(res *Result, s *scratch, granted bool) {
	for k := range s.parts {
		p := &s.parts[k]
		if p.follows < 0 {
			continue
		}
		lp := &s.parts[p.follows]
		leader := &res.Statuses[lp.st]
		st := &res.Statuses[p.st]
		st.Remaining, st.ResetAfter = leader.Remaining, leader.ResetAfter
		p.state = within
		left := st.Remaining
		if granted && lp.req.CheckOnly {
			left -= lp.req.Count
		}
		if left < 0 {
			p.state, st.Code, st.RetryAfter = over, OverLimit, leader.RetryAfter
			if p.shadow {
				st.Code, st.Shadowed = OK, true
			}
		}
	}
}
