package ratelimit

import (
	"github.com/seed7fbd42b6/ratelimit/internal/actor"
	"github.com/seed7fbd42b6/ratelimit/internal/bucket"
)

// addMember adds to c a member for one request on (d, key): one item, or two
// distinct random shards for a sharded limit (power of two choices).
func (l *Limiter) addMember(c *actor.Call, d *limitDef, key string, op actor.Op, count float64, reserve bool) {
	m := int32(len(c.Members))
	h := bucket.HashWith(d.nameHash, key)
	item := actor.Item{ID: actor.BucketID{Name: d.name, Key: key}, Lim: &d.shard, Phase: d.phaseFor(h)}
	mem := actor.Member{Op: op, Count: count, Reserve: reserve, B: -1, Ref: d}
	if d.shards == 1 {
		item.Part, item.Hash = l.store.Route(h, 0), actor.TableHash(d.nameHash, key, 0)
		mem.A = c.AddItem(item, m, false)
	} else {
		i, j := twoShards(d.shards)
		item.ID.Shard, item.Part, item.Hash = uint32(i), l.store.Route(h, uint32(i)), actor.TableHash(d.nameHash, key, uint32(i))
		mem.A = c.AddItem(item, m, false)
		item.ID.Shard, item.Part, item.Hash = uint32(j), l.store.Route(h, uint32(j)), actor.TableHash(d.nameHash, key, uint32(j))
		mem.B = c.AddItem(item, m, true)
	}
	c.Members = append(c.Members, mem)
}

// addShards adds one item per shard of (d, key), for reads and resets.
func (l *Limiter) addShards(c *actor.Call, d *limitDef, key string) {
	h := bucket.HashWith(d.nameHash, key)
	for s := 0; s < d.shards; s++ {
		c.AddItem(actor.Item{
			ID:    actor.BucketID{Name: d.name, Key: key, Shard: uint32(s)},
			Lim:   &d.shard,
			Phase: d.phaseFor(h),
			Part:  l.store.Route(h, uint32(s)),
			Hash:  actor.TableHash(d.nameHash, key, uint32(s)),
		}, -1, false)
	}
}
