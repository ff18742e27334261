package ratelimit

import (
	"context"
	"fmt"
	"slices"

	"github.com/seed7fbd42b6/ratelimit/internal/actor"
)

// Credit gives count tokens back to (name, key): a reserved job that was
// cancelled, an LLM call that used fewer tokens than estimated. The bucket
// is capped at its capacity. For a sharded limit the credit is spread so
// that the emptiest shards are filled first (as they stood when Credit
// read them: a request racing with it may make another shard emptier).
// Like a grant, a credit is durable before Credit returns. ctx is only
// checked before the credit is sent: once sent, Credit waits for its
// outcome, so an error means nothing was credited (unless the log failed
// part way through a sharded credit spread over partitions) and the
// caller may retry.
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
	defer c.Release()
	if d.shards == 1 {
		l.addMember(c, d, key, actor.OpCredit, count, false)
	} else if err := l.spreadCredit(c, d, key, count); err != nil {
		return err
	}
	// Once sent, a credit is waited for even if ctx ends (Decide gets a
	// context that cannot end): a credit is not idempotent, so a caller
	// told it failed must be able to retry it without giving the tokens
	// back twice.
	if _, err := l.store.Decide(context.Background(), c); err != nil {
		return err // cannot happen: the context never ends
	}
	return l.itemErr(c.FirstErr())
}

// spreadCredit adds to c one credit member per shard of (d, key) that
// water-filling gives tokens to: it reads every shard, then raises the
// emptiest to a common level, each capped at its capacity, using count
// tokens in all. Each member is a capped credit of its own shard, so a
// request that changed a shard since it was read is never undone.
func (l *Limiter) spreadCredit(c *actor.Call, d *limitDef, key string, count float64) error {
	read := actor.NewCall()
	defer read.Release()
	l.addShards(read, d, key)
	l.store.Peek(read)
	if err := l.itemErr(read.FirstErr()); err != nil {
		return err
	}
	values := make([]float64, len(read.Items))
	for i := range read.Items {
		values[i] = d.perShard.Project(read.Items[i].State, read.Now).Value
	}
	h := l.hashKey(d, key)
	for i, amount := range fillEmptiest(values, d.perShard.Capacity, count) {
		if amount > 0 {
			m := int32(len(c.Members))
			c.Members = append(c.Members, actor.Member{Op: actor.OpCredit, Count: amount, Second: -1, Def: d,
				First: l.addItem(c, d, key, h, read.Items[i].ID.Shard, m, false)})
		}
	}
	return nil
}

// fillEmptiest returns how much of count each of the shards whose values
// are given receives by water-filling: the emptiest rise to a common
// level L, none above capacity, using exactly count tokens (or as many as
// fit below capacity).
func fillEmptiest(values []float64, capacity, count float64) []float64 {
	order := make([]int, len(values))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		switch {
		case values[a] < values[b]:
			return -1
		case values[a] > values[b]:
			return 1
		}
		return 0
	})
	// Find the level L: the k emptiest values rise to L (at most the next
	// one's value), using exactly count tokens; L never exceeds capacity.
	level, sum := capacity, 0.0
	for k := 1; k <= len(order); k++ {
		sum += values[order[k-1]]
		next := capacity
		if k < len(order) {
			next = min(values[order[k]], capacity)
		}
		if float64(k)*next-sum >= count {
			level = (count + sum) / float64(k)
			break
		}
	}
	amounts := make([]float64, len(values))
	for i, v := range values {
		if v < level {
			amounts[i] = level - v
		}
	}
	return amounts
}
