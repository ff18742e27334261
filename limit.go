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
func (l *Limiter) Limit(ctx context.Context, r Request) (Status, error) {
	return l.decideOne(ctx, &r, r.op())
}

// Check answers as Limit would, without taking anything: Limit with
// r.CheckOnly set.
func (l *Limiter) Check(ctx context.Context, r Request) (Status, error) {
	return l.decideOne(ctx, &r, actor.OpCheck)
}

func (l *Limiter) decideOne(ctx context.Context, r *Request, op actor.Op) (Status, error) {
	if err := l.usable(ctx); err != nil {
		return Status{}, err
	}
	if err := checkKey(r.Key); err != nil {
		return Status{}, err
	}
	d, err := l.resolve(r.Name, r.Config)
	if err != nil {
		return Status{}, err
	}
	n, err := d.count(r.Count, r.Reserve)
	if err != nil {
		return Status{}, err
	}
	if l.alone && d.shards == 1 {
		// One bucket in memory: decided under its partition's mutex, with
		// no call, if the partition is idle.
		mem := actor.Member{Op: op, Count: n, Reserve: r.Reserve, Second: -1, Def: d}
		var it actor.Item
		l.setItem(&it, d, r.Key, l.hashKey(d, r.Key), 0)
		if l.group.DecideAlone(&it, &mem) {
			if err := l.itemErr(it.Err); err != nil {
				return Status{}, err
			}
			return d.status(&mem), nil
		}
	}
	c := actor.NewCall()
	c.Atomic = true // a sharded request's two shards are one decision
	l.addMember(c, d, r.Key, op, n, r.Reserve)
	if abandoned, err := l.store.Decide(ctx, c); err != nil {
		if !abandoned {
			c.Release()
		}
		return Status{}, err
	}
	err = l.itemErr(c.ItemErr(0))
	st := d.status(&c.Members[0])
	c.Release()
	if err != nil {
		return Status{}, err
	}
	return st, nil
}
