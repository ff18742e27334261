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
// read them: a request racing with it may make another shard emptier),
// and the limit gets all of count unless its shards fill up.
// Like a grant, a credit is durable before Credit returns. ctx is only
// checked before the credit is sent: once sent, Credit waits for its
// outcome, so an error means nothing was credited (unless the log failed
// or the limiter closed part way through a sharded credit spread over
// partitions) and the caller may retry. On Redis (package redislimit) an
// ErrUnavailable may also be a credit the server applied whose reply was
// lost: retrying it can credit twice.
func (l *Limiter) Credit(ctx context.Context, name, key string, count float64) error {
	if err := l.usable(ctx); err != nil {
		return err
	}
	g := l.holdGate()
	if g.n != nil { // a shared store: see callGate
		defer g.drop()
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
	if d.shards > 1 {
		return l.creditShards(d, key, count)
	}
	c := actor.NewCall()
	defer c.Release()
	l.addMember(c, d, key, actor.OpCredit, count, false)
	return l.decideCredit(c)
}

// decideCredit sends c's credit members and waits for their outcome.
// Once sent, a credit is waited for even if the caller's ctx ends (Decide
// gets a context that cannot end): a credit is not idempotent, so a caller
// told it failed must be able to retry it without giving the tokens back
// twice.
func (l *Limiter) decideCredit(c *actor.Call) error {
	if _, err := l.store.Decide(context.Background(), c); err != nil {
		return err // cannot happen: the context never ends
	}
	return l.itemErr(c.FirstErr())
}

// maxSpreads bounds the rounds of a sharded credit: each round spreads
// what the shards' caps refused in the previous one (a racing credit
// filled a shard first), so only a storm of racing credits needs more
// than two.
const maxSpreads = 8

// creditShards credits count tokens to the shards of (d, key), spread by
// spreadCredit; what a shard's cap refuses because a racing credit filled
// it after it was read is spread again over the shards that still have
// room, so the limit as a whole gets all of count, capped only at its
// total capacity.
func (l *Limiter) creditShards(d *limitDef, key string, count float64) error {
	for range maxSpreads {
		c := actor.NewCall()
		err := l.spreadCredit(c, d, key, count)
		if err == nil && len(c.Members) > 0 {
			err = l.decideCredit(c)
		}
		spill := 0.0 // none when no shard had room
		for i := range c.Members {
			spill += c.Members[i].Spill()
		}
		c.Release()
		if err != nil || spill <= d.perShard.Capacity*1e-12 { // rounding, not a race
			return err
		}
		count = spill
	}
	return nil
}

// spreadCredit adds to c one credit member per shard of (d, key) that
// water-filling gives tokens to: it reads every shard, then raises the
// emptiest to a common level, each capped at its capacity, using count
// tokens in all. Each member is a capped credit of its own shard, so a
// request that changed a shard since it was read is never undone.
func (l *Limiter) spreadCredit(c *actor.Call, d *limitDef, key string, count float64) error {
	read := actor.NewCall()
	defer read.Release()
	l.addShards(read, d, key, d.shards)
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
