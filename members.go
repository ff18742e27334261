package ratelimit

import (
	"github.com/seed7fbd42b6/ratelimit/internal/actor"
	"github.com/seed7fbd42b6/ratelimit/internal/bucket"
)

// keyHashes are a request's hashes of (name, key), each computed once (see
// internal/bucket's hash.go): route places the key's buckets on
// partitions (the same in every process, so a shared store agrees) and a
// fixed window's phase; table keys the partitions' tables.
type keyHashes struct {
	table, route uint64
	phase        int64
}

func (l *Limiter) hashKey(d *limitDef, key string) keyHashes {
	h := l.routeKey(d, key)
	h.table = bucket.TableHash(d.nameHash, key)
	return h
}

// hashItem sets it.Hash, the table hash that setItem leaves 0 when given
// routeKey's hashes.
func (l *Limiter) hashItem(it *actor.Item, d *limitDef) {
	it.Hash = bucket.ShardHash(bucket.TableHash(d.nameHash, it.ID.Key), it.ID.Shard)
}

// routeKey is hashKey without the table hash (0).
func (l *Limiter) routeKey(d *limitDef, key string) keyHashes {
	h := keyHashes{route: bucket.HashWith(d.nameHash, key), phase: d.phase}
	if d.hashedPhase {
		h.phase = bucket.Phase(h.route, d.perShard.Period)
	}
	return h
}

// setItem fills it as the bucket shard of (d, key).
func (l *Limiter) setItem(it *actor.Item, d *limitDef, key string, h keyHashes, shard uint32) {
	// Field by field: a composite literal is built on the stack and
	// copied in wider words than it was written in, which stalls.
	it.ID.Name, it.ID.Key, it.ID.Shard = d.name, key, shard
	it.Hash = bucket.ShardHash(h.table, shard)
	it.Lim, it.Gen = &d.perShard, d.gen
	it.Phase = h.phase
	it.Part = l.store.Route(h.route, shard)
}

// addItem adds to c the bucket shard of (d, key), serving member m (as
// in actor.Call.AddItem), and returns its index.
func (l *Limiter) addItem(c *actor.Call, d *limitDef, key string, h keyHashes, shard uint32, m int32, second bool) int32 {
	i := c.NewItem(m, second)
	l.setItem(&c.Items[i], d, key, h, shard)
	return i
}

// addMember adds to c a member for one request on (d, key): one item, or two
// distinct random shards for a sharded limit (power of two choices).
func (l *Limiter) addMember(c *actor.Call, d *limitDef, key string, op actor.Op, count float64, reserve bool) {
	m := int32(len(c.Members))
	h := l.hashKey(d, key)
	// Filled in place: a member built on the stack and appended is read
	// back in wider words than it was written in, which stalls.
	c.Members = append(c.Members, actor.Member{})
	mem := &c.Members[m]
	mem.Op, mem.Count, mem.Reserve, mem.Second, mem.Def = op, count, reserve, -1, d
	if d.shards == 1 {
		mem.First = l.addItem(c, d, key, h, 0, m, false)
	} else {
		i, j := twoShards(d.shards)
		mem.First = l.addItem(c, d, key, h, uint32(i), m, false)
		mem.Second = l.addItem(c, d, key, h, uint32(j), m, true)
	}
}

// addShards adds one item for each of shards 0 to n-1 of (d, key), for
// reads (n = d.shards) and resets.
func (l *Limiter) addShards(c *actor.Call, d *limitDef, key string, n int) {
	h := l.hashKey(d, key)
	for s := range n {
		l.addItem(c, d, key, h, uint32(s), -1, false)
	}
}
