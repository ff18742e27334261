package ratelimit

import (
	"context"
	"math"
	"time"

	"github.com/seed7fbd42b6/ratelimit/internal/actor"
)

// Reset deletes every shard of (name, key): the bucket is full again. That
// includes the shards beyond the limit's Shards that an earlier config of
// the name used since Open, or that the file holds (SetLimits keeps them),
// so that the bucket stays full if those shards come back; a Reset costs
// (and on a file, logs) one deletion for each of them. The deletion is
// durable before Reset returns.
//
// Reset, Value and Credit take a limit's name: one of Options.Limits, or
// one that a request carried inline since Open. An inline-only limit is
// unknown to them after a restart until a request carries its config again;
// put limits you reset in Options.Limits.
func (l *Limiter) Reset(ctx context.Context, name, key string) error {
	if err := l.usable(ctx); err != nil {
		return err
	}
	if err := checkKey(key); err != nil {
		return err
	}
	d, err := l.resolve(name, nil)
	if err != nil {
		return err
	}
	c := actor.NewCall()
	defer c.Release()
	l.addShards(c, d, key, max(d.shards, l.shardsOf(name)))
	l.store.Reset(c)
	return l.itemErr(c.FirstErr())
}

// Value returns the state of (name, key) projected to now, summed over the
// limit's shards, and the limit's config. It writes nothing.
func (l *Limiter) Value(ctx context.Context, name, key string) (Value, error) {
	if err := l.usable(ctx); err != nil {
		return Value{}, err
	}
	if err := checkKey(key); err != nil {
		return Value{}, err
	}
	d, err := l.resolve(name, nil)
	if err != nil {
		return Value{}, err
	}
	c := actor.NewCall()
	defer c.Release()
	l.addShards(c, d, key, d.shards)
	l.store.Peek(c)
	if err := l.itemErr(c.FirstErr()); err != nil {
		return Value{}, err
	}
	now := c.Now // the time the states are current at: the store's clock (a shared server's, on redislimit)
	v := Value{Config: d.cfg}
	ts := int64(math.MinInt64)
	for i := range c.Items {
		s := d.perShard.Project(c.Items[i].State, now)
		v.Value += s.Value
		ts = max(ts, s.TS)
	}
	v.TS = time.Unix(0, ts)
	return v, nil
}
