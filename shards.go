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
