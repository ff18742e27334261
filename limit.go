package ratelimit

import (
	"context"

	"github.com/seed7fbd42b6/ratelimit/internal/actor"
)

// Limit asks for r.Count tokens and, if they are granted, takes them. A
// denial is OK == false with a nil error; an error means the request could
// not be decided and nothing was taken (but see ErrUnavailable). With
// Options.Path set, a grant is on disk before Limit returns.
//
// If ctx ends while the request waits, Limit returns ctx's error; a request
// a partition had already taken up may still be granted (and committed):
// that can only under-admit.
func (l *Limiter) Limit(ctx context.Context, r Request) (st Status, err error) {
	err = l.decideOne(ctx, &r, r.op(), &st)
	return st, err
}

// Check answers as Limit would, without taking anything: Limit with
// r.CheckOnly set.
func (l *Limiter) Check(ctx context.Context, r Request) (st Status, err error) {
	err = l.decideOne(ctx, &r, actor.OpCheck, &st)
	return st, err
}

// Grantable reports whether r can ever be granted: whether its limit's
// buckets, full, would grant it (two full shards, for a sharded limit),
// nothing else taken. Limit, Check, LimitAll and LimitMany refuse a
// request for which it is false with ErrInvalidCount, where a denial's
// RetryAfter would never come true. r's errors are theirs too
// (ErrUnknownLimit, ErrInvalidKey, ErrInvalidConfig, ErrInvalidCount for a
// count that is no number of tokens), and ErrClosed on a zero Limiter; it
// reads no bucket (so it still answers after Close) and is safe for
// concurrent use.
func (l *Limiter) Grantable(r Request) (bool, error) {
	if l.store == nil { // a zero Limiter
		return false, ErrClosed
	}
	if err := checkKey(r.Key); err != nil {
		return false, err
	}
	d, err := l.resolve(r.Name, r.Config)
	if err != nil {
		return false, err
	}
	n, err := tokens(r.Count)
	if err != nil {
		return false, err
	}
	return n <= d.mostCount(r.Reserve), nil
}

// decideOne decides r as op (a take or a check) and fills st, which is
// left as it is on an error. The status is filled in place rather than
// returned: Status has too many fields for the compiler to keep in
// registers, and each return would copy it through memory.
func (l *Limiter) decideOne(ctx context.Context, r *Request, op actor.Op, st *Status) error {
	if l.gate != nil {
		return l.decideGated(ctx, r, op, st)
	}
	return l.decide(ctx, r, op, st, nil)
}

// decideGated is decideOne on a shared store, holding its gate (see
// callGate). Apart, so that the other stores' decisions pay no defer.
func (l *Limiter) decideGated(ctx context.Context, r *Request, op actor.Op, st *Status) error {
	g := l.holdGate()
	defer g.drop()
	return l.decide(ctx, r, op, st, &g)
}

// decide is decideOne; g, if not nil, is the gate hold to hand to the
// call.
func (l *Limiter) decide(ctx context.Context, r *Request, op actor.Op, st *Status, g *gateHold) error {
	if err := l.usable(ctx); err != nil {
		return err
	}
	if err := checkKey(r.Key); err != nil {
		return err
	}
	d, err := l.resolve(r.Name, r.Config)
	if err != nil {
		return err
	}
	n, err := d.count(r.Count, r.Reserve)
	if err != nil {
		return err
	}
	if l.alone && d.shards == 1 {
		// One bucket: decided under its partition's mutex, with no call,
		// if the partition is idle.
		var mem actor.Member
		mem.Op, mem.Count, mem.Reserve, mem.Second, mem.Def = op, n, r.Reserve, -1, d
		// A published denial is repeated before the table hash is worked
		// out: it needs none.
		var it actor.Item
		l.setItem(&it, d, r.Key, l.routeKey(d, r.Key), 0)
		now, done := l.group.RepeatDenial(&it, &mem)
		if !done {
			l.hashItem(&it, d)
			var err error
			if done, err = l.group.DecideAlone(ctx, &it, &mem, now); err != nil {
				return err
			}
		}
		if done {
			if err := l.itemErr(it.Err); err != nil {
				return err
			}
			d.fill(st, &mem)
			return nil
		}
	}
	c := actor.NewCall()
	c.Atomic = true // a sharded request's two shards are one decision
	if g != nil {
		g.hand(c) // held until the store is done with c
	}
	l.addMember(c, d, r.Key, op, n, r.Reserve)
	if abandoned, err := l.store.Decide(ctx, c); err != nil {
		if !abandoned {
			c.Release()
		}
		return err
	}
	if err = l.itemErr(c.ItemErr(0)); err == nil {
		d.fill(st, &c.Members[0])
	}
	c.Release()
	return err
}
