package ratelimit

import (
	"math/rand/v2"
)

// twoShards draws two distinct random shards of n, for the power of two
// choices: a uniformly random shard i and its pair mate i^1, which shares
// i's partition (see actor.Group.Route), so that the request is decided by
// one partition in one step instead of a reservation across two. Each pair
// balances its two shards; the pairs are drawn uniformly. Only the last
// shard of an odd n has no mate: it is paired with a random other shard,
// usually on another partition (the hold-free path of actor.twoChoices).
func twoShards(n int) (i, j int) {
	i = rand.IntN(n)
	if j = i ^ 1; j < n {
		return i, j
	}
	j = rand.IntN(n - 1)
	if j >= i {
		j++
	}
	return i, j
}

// sawShards notes that name's buckets may have n shards: a bucket of a
// shard beyond its limit's Shards is kept (see SetLimits) and read again
// when the shards come back, so Reset deletes every shard the name has had
// since Open, by its configs (named and inline) and in the file.
func (l *Limiter) sawShards(name string, n int) {
	l.shardsMu.Lock()
	defer l.shardsMu.Unlock()
	if n > l.shardsSeen[name] {
		if l.shardsSeen == nil {
			l.shardsSeen = make(map[string]int)
		}
		l.shardsSeen[name] = n
	}
}

// sawLimits is sawShards for every limit of defs.
func (l *Limiter) sawLimits(defs map[string]*limitDef) {
	for name, d := range defs {
		l.sawShards(name, d.shards)
	}
}

// shardsOf is the most shards name has had (see sawShards), 0 if none.
func (l *Limiter) shardsOf(name string) int {
	l.shardsMu.Lock()
	defer l.shardsMu.Unlock()
	return l.shardsSeen[name]
}
