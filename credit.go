package ratelimit

import (
	"context"
	"fmt"
	"slices"

	"github.com/seed7fbd42b6/ratelimit/internal/actor"
)

// Credit gives count tokens back to (name, key): a reserved job that was
// cancelled, an LLM call that used fewer tokens than estimated. The bucket
// is capped at its capacity. For a sharded limit the emptiest shards are
// filled first. Like a grant, a credit is durable before Credit returns.
// ctx is only checked before the credit is sent: once sent, Credit waits
// for its outcome, so an error always means nothing was credited (unless
// the log failed part way through a sharded credit spread over
// partitions) and the caller may retry.
func (l *Limiter) Credit(ctx context.Context, name, key string, count float64) error {
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
	if !finite(count) || count < 0 {
		return fmt.Errorf("%w: credit %v", ErrInvalidCount, count)
	}
	if count == 0 {
		return nil
	}
	c := actor.NewCall()
	c.Atomic = true
	if d.shards == 1 {
		l.addMember(c, d, key, actor.OpCredit, count, false)
	} else {
		l.addShards(c, d, key)
		c.DecideFn = func(c *actor.Call, now int64) bool { fillEmptiest(c, now, count); return true }
	}
	// Once sent, a credit is waited for even if ctx ends (Decide gets a
	// context that cannot end): a credit is not idempotent, so a caller
	// told it failed must be able to retry it without giving the tokens
	// back twice.
	abandoned, err := l.store.Decide(context.Background(), c)
	if err != nil {
		if !abandoned {
			c.Release()
		}
		return err
	}
	defer c.Release()
	return l.itemErr(c.FirstErr())
}

// fillEmptiest spreads count over the items (the shards of one key) by
// water-filling: it raises the emptiest shards to a common level, each
// capped at capacity, so the credit goes where tokens are lowest.
func fillEmptiest(c *actor.Call, now int64, count float64) {
	type shard struct {
		i int
		v float64
	}
	lim := c.Items[0].Lim
	ss := make([]shard, len(c.Items))
	for i := range c.Items {
		ss[i] = shard{i, lim.Project(c.Items[i].State, now).Value}
	}
	slices.SortFunc(ss, func(a, b shard) int {
		switch {
		case a.v < b.v:
			return -1
		case a.v > b.v:
			return 1
		}
		return 0
	})
	// Find the level L: the k emptiest shards rise to L (at most the next
	// one's value), using exactly count tokens; L never exceeds capacity.
	level, sum := lim.Capacity, 0.0
	for k := 1; k <= len(ss); k++ {
		sum += ss[k-1].v // the k emptiest values
		next := lim.Capacity
		if k < len(ss) {
			next = min(ss[k].v, lim.Capacity)
		}
		if float64(k)*next-sum >= count {
			level = (count + sum) / float64(k)
			break
		}
	}
	for _, s := range ss {
		if s.v < level {
			it := &c.Items[s.i]
			it.State = lim.Credit(it.State, now, level-s.v)
			it.Write = true
		}
	}
}
