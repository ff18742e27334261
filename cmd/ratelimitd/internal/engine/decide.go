package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/seed7fbd42b6/ratelimit"
	"github.com/seed7fbd42b6/ratelimit/cmd/ratelimitd/internal/config"
)

// Decide decides req all or nothing and writes its outcome to res
// (reusing res.Statuses). A denial is res.Code == OverLimit with a nil
// error. Errors: ErrInvalidRequest, ErrUnknownDomain, ErrUnavailable
// (unless Options.FailOpen), or ctx's error; nothing was taken then.
func (e *Engine) Decide(ctx context.Context, req *Request, res *Result) error {
	if err := e.limits.validate(req); err != nil {
		e.stats.invalid.Add(1)
		return err
	}
	err := e.decide(ctx, req, res)
	if errors.Is(err, ratelimit.ErrUnknownLimit) {
		// A reload removed the limit between matching and deciding: the
		// new configuration decides.
		err = e.decide(ctx, req, res)
	}
	return e.outcome(ctx, err, res)
}

// outcome counts a decision and turns the limiter's errors into the
// engine's.
func (e *Engine) outcome(ctx context.Context, err error, res *Result) error {
	c := &e.stats
	switch {
	case err == nil:
		if e.opts.TransientFailures && e.failing.Load() && e.failing.CompareAndSwap(true, false) {
			e.log.Info("the limiter decides again")
		}
		if res.Code == OverLimit {
			c.denied.Add(1)
		} else {
			c.granted.Add(1)
		}
		c.countStatuses(res.Statuses)
		return nil
	case ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
		return err
	case errors.Is(err, ErrInvalidRequest):
		c.invalid.Add(1)
		return err
	case errors.Is(err, ratelimit.ErrInvalidCount), errors.Is(err, ratelimit.ErrInvalidKey), errors.Is(err, ratelimit.ErrInvalidConfig), errors.Is(err, ratelimit.ErrTooLarge):
		c.invalid.Add(1)
		return fmt.Errorf("%w: %v", ErrInvalidRequest, err)
	case errors.Is(err, ErrUnknownDomain):
		c.unknownDomainErrors.Add(1)
		return err
	}
	c.unavailable.Add(1)
	failed := errors.Is(err, ratelimit.ErrUnavailable) || errors.Is(err, ratelimit.ErrClosed)
	if failed {
		e.markFailed(err)
	}
	if e.opts.FailOpen && failed { // not ErrTooManyKeys: a flood of keys must not turn limiting off
		c.failedOpen.Add(1)
		res.reset(len(res.Statuses))
		for i := range res.Statuses {
			res.Statuses[i].Code = OK
		}
		res.FailedOpen = true
		return nil
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// markFailed records that the limiter could not decide: for good (the
// engine is unhealthy from now on), or, with TransientFailures, until a
// decision succeeds again.
func (e *Engine) markFailed(err error) {
	if e.opts.TransientFailures {
		if e.failing.CompareAndSwap(false, true) {
			e.log.Error("the limiter cannot decide (its storage does not answer); requests fail (fail closed) until it does", slog.Any("err", err))
		}
		return
	}
	if e.failed.CompareAndSwap(false, true) {
		e.log.Error("the limiter failed; every request is refused (fail closed) until ratelimitd is restarted", slog.Any("err", err))
	}
}

// part is a descriptor the limiter decides.
type part struct {
	st     int // its Status in Result.Statuses
	req    ratelimit.Request
	zero   bool    // hits 0: checked for one token, judged by the bucket's value when that fails
	own    float64 // its hits; in a check, req.Count adds prior
	prior  float64 // what the parts before it take from its bucket
	shadow bool
	quota  bool
	// follows is, for a zero part on a bucket an earlier part of the
	// request takes from, that part's index: it reports the bucket as that
	// part leaves it rather than being sent (the limiter would refuse a
	// check placed after a take that empties the bucket). Else -1.
	follows int
	state   partState
}

type partState uint8

const (
	pending partState = iota // to be sent to the limiter
	within                   // decided within its limit; not sent again
	over                     // decided over its limit; not sent again
)

// scratch is one Decide's working memory, pooled.
type scratch struct {
	limits []*config.Limit
	inline []bool // the descriptor's limit is the request's override
	parts  []part
	rs     []ratelimit.Request
	sent   []int // rs[j] is parts[sent[j]]
	each   []ratelimit.Status
	// uses indexes the pending parts by bucket once there are more than
	// linearParts parts (see taken), so that a request's cost stays linear
	// in its descriptors; indexed says it is in use.
	uses    map[bucketRef]bucketUse
	indexed bool
	// first[j] is the first of rs on rs[j]'s bucket (see firstUses), found
	// through firsts beyond linearParts requests.
	first  []int
	firsts map[bucketRef]int
}

// linearParts is how many planned parts taken and taker scan; beyond, they
// look the bucket up in scratch.uses.
const linearParts = 16

// bucketRef names a part's bucket: its limit's name and key.
type bucketRef struct{ name, key string }

// bucketUse is what the pending parts planned so far take from one bucket,
// and the last of them.
type bucketUse struct {
	sum  float64
	last int
}

func (e *Engine) getScratch() *scratch {
	s, _ := e.scratch.Get().(*scratch)
	if s == nil {
		s = new(scratch)
	}
	s.limits, s.inline, s.parts = s.limits[:0], s.inline[:0], s.parts[:0]
	if s.indexed {
		clear(s.uses)
		s.indexed = false
	}
	clear(s.firsts)
	return s
}

func (e *Engine) putScratch(s *scratch) {
	clear(s.limits[:cap(s.limits)])
	clear(s.parts[:cap(s.parts)])
	clear(s.rs[:cap(s.rs)])
	e.scratch.Put(s)
}

func (e *Engine) decide(ctx context.Context, req *Request, res *Result) error {
	cfg := e.cfg.Load()
	res.reset(len(req.Descriptors))
	for i := range res.Statuses {
		res.Statuses[i].Code, res.Statuses[i].Hits = OK, req.Descriptors[i].Hits
	}
	if !cfg.HasDomain(req.Domain) {
		if e.opts.UnknownDomainError {
			return fmt.Errorf("%w: %q", ErrUnknownDomain, req.Domain)
		}
		e.unknownDomain(req.Domain)
		return nil
	}
	s := e.getScratch()
	defer e.putScratch(s)
	if err := e.match(cfg, req, res, s); err != nil {
		return err
	}
	e.plan(req, res, s)
	return e.run(ctx, res, s)
}

// match finds each descriptor's rule and kind.
func (e *Engine) match(cfg *config.Config, req *Request, res *Result, s *scratch) error {
	replaces := false
	for i := range req.Descriptors {
		d, st := &req.Descriptors[i], &res.Statuses[i]
		var m config.Match
		ok := false
		if d.Override != nil {
			var err error
			m, err = config.OverrideLimit(req.Domain, d.Entries, d.Override.RequestsPerUnit, d.Override.Unit, d.Override.Multiplier)
			if err != nil {
				return fmt.Errorf("%w: descriptor %d: %v", ErrInvalidRequest, i, err)
			}
			if err := e.over.admit(m.Limit.Name); err != nil {
				return err
			}
			ok = true
		} else {
			m, ok = cfg.Match(req.Domain, d.Entries)
		}
		if ok {
			st.Limit, st.Key = m.Limit, m.Key
			replaces = replaces || len(m.Limit.Replaces) > 0
		}
		s.limits = append(s.limits, st.Limit)
		s.inline = append(s.inline, d.Override != nil)
	}
	var replaced []bool
	if replaces {
		replaced = config.Replaced(s.limits)
	}
	for i := range res.Statuses {
		st := &res.Statuses[i]
		switch {
		case st.Limit == nil:
			st.Kind = NoLimit
		case st.Limit.Unlimited:
			st.Kind, st.Key = Unlimited, ""
		case replaced != nil && replaced[i]:
			st.Kind, st.Replaced, st.Limit, st.Key = NoLimit, true, nil, ""
		default:
			st.Kind = Limited
		}
	}
	return nil
}

// plan turns the Limited descriptors into parts, deciding at once those
// that need no limiter: hits 0 on a rule that allows nothing, and hits no
// time could grant.
func (e *Engine) plan(req *Request, res *Result, s *scratch) {
	var now time.Time
	for i := range res.Statuses {
		st := &res.Statuses[i]
		if st.Kind != Limited {
			continue
		}
		l := st.Limit
		p := part{st: i, shadow: l.ShadowMode, quota: l.QuotaMode, follows: -1}
		if l.Blocked {
			if now.IsZero() {
				now = e.now()
			}
			st.ResetAfter = windowEnd(now, l.Unit.Duration()*time.Duration(max(l.UnitMultiplier, 1)))
			p.state = within
			if st.Hits > 0 {
				p.state, st.Never = over, true
			}
			s.parts = append(s.parts, p)
			continue
		}
		c := l.Config
		reserve := req.Reserve && st.Hits > 0
		count := float64(st.Hits)
		if st.Hits == 0 {
			p.zero, count = true, 1
		} else {
			p.own = count
		}
		p.req = ratelimit.Request{Name: l.Name, Key: st.Key, Count: count, Reserve: reserve, CheckOnly: p.zero || req.CheckOnly}
		if s.inline[i] {
			p.req.Config = &l.Config
		}
		// never: no time grants it, as the limiter computes it (an error is
		// the limiter's to report when it decides)
		ok, err := e.lim.Grantable(p.req)
		if s.inline[i] && errors.Is(err, ratelimit.ErrInvalidConfig) {
			e.over.forget(l.Name)
		}
		never := err == nil && !ok
		prior := 0.0 // what the parts before take from this bucket
		if !p.zero {
			prior = s.taken(p.req)
			p.prior = prior
			if req.CheckOnly { // checked as it would be decided: after them
				p.req.Count = e.checkCount(p.req, prior+count, count)
			}
		}
		switch {
		case p.zero && never:
			p.state = within // a bucket that cannot hold one token holds no debt either
		case never || prior+count > maxTotal(c, reserve):
			if now.IsZero() {
				now = e.now()
			}
			p.state, st.Never = over, true
			st.ResetAfter = c.Period
			if c.Kind == ratelimit.FixedWindow {
				st.ResetAfter = windowEnd(now, c.Period)
			}
		case p.zero:
			p.follows = s.taker(p.req)
		}
		s.parts = append(s.parts, p)
		s.planned()
	}
}

// planned indexes the part just planned, the last of s.parts, once there
// are more than linearParts (indexing those before it then).
func (s *scratch) planned() {
	if !s.indexed {
		if len(s.parts) <= linearParts {
			return
		}
		if s.uses == nil {
			s.uses = make(map[bucketRef]bucketUse)
		}
		s.indexed = true
		for k := range len(s.parts) - 1 {
			s.index(k)
		}
	}
	s.index(len(s.parts) - 1)
}

// index adds part k to s.uses if it takes from its bucket (would take, in
// a check). Parts are indexed in order, so sums add up as taken's scan
// would.
func (s *scratch) index(k int) {
	p := &s.parts[k]
	if !p.takes(p.req) {
		return
	}
	b := bucketRef{p.req.Name, p.req.Key}
	u := s.uses[b]
	u.sum += p.own
	u.last = k
	s.uses[b] = u
}

// taken is what the parts planned so far take from r's bucket (would
// take, in a check).
func (s *scratch) taken(r ratelimit.Request) float64 {
	if s.indexed {
		return s.uses[bucketRef{r.Name, r.Key}].sum
	}
	sum := 0.0
	for k := range s.parts {
		if p := &s.parts[k]; p.takes(r) {
			sum += p.own
		}
	}
	return sum
}

// taker is the last part planned so far that takes from r's bucket (would
// take, in a check), or -1.
func (s *scratch) taker(r ratelimit.Request) int {
	if s.indexed {
		if u, ok := s.uses[bucketRef{r.Name, r.Key}]; ok {
			return u.last
		}
		return -1
	}
	last := -1
	for k := range s.parts {
		if s.parts[k].takes(r) {
			last = k
		}
	}
	return last
}

// takes reports whether p takes from r's bucket (would take, in a check).
func (p *part) takes(r ratelimit.Request) bool {
	return p.state == pending && !p.zero && p.req.Name == r.Name && p.req.Key == r.Key
}
