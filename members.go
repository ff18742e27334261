package ratelimit

import (
	"github.com/seed7fbd42b6/ratelimit/internal/actor"
	"github.com/seed7fbd42b6/ratelimit/internal/bucket"
)

// keyHashes are a request's two hashes of (name, key), computed once (see
// internal/bucket's hash.go): route places buckets and fixed-window
// phases, table keys the partitions' tables.
type keyHashes struct{ route, table uint64 }

func hashKey(d *limitDef, key string) keyHashes {
	return keyHashes{bucket.HashWith(d.nameHash, key), bucket.TableHash(d.nameHash, key)}
}

// item is the bucket shard of (d, key).
func (l *Limiter) item(d *limitDef, key string, h keyHashes, shard uint32) actor.Item {
	return actor.Item{
		ID:    actor.BucketID{Name: d.name, Key: key, Shard: shard},
		Hash:  bucket.ShardHash(h.table, shard),
		Lim:   &d.perShard,
		Phase: d.phaseFor(h.route),
		Part:  l.store.Route(h.route, shard),
	}
}

// addMember adds to c a member for one request on (d, key): one item, or two
// distinct random shards for a sharded limit (power of two choices).
func (l *Limiter) addMember(c *actor.Call, d *limitDef, key string, op actor.Op, count float64, reserve bool) {
	m := int32(len(c.Members))
	h := hashKey(d, key)
	mem := actor.Member{Op: op, Count: count, Reserve: reserve, Second: -1, Def: d}
	if d.shards == 1 {
		mem.First = c.AddItem(l.item(d, key, h, 0), m, false)
	} else {
		i, j := twoShards(d.shards)
		mem.First = c.AddItem(l.item(d, key, h, uint32(i)), m, false)
		mem.Second = c.AddItem(l.item(d, key, h, uint32(j)), m, true)
	}
	c.Members = append(c.Members, mem)
}

// addShards adds one item per shard of (d, key), for reads and resets.
func (l *Limiter) addShards(c *actor.Call, d *limitDef, key string) {
	h := hashKey(d, key)
	for s := 0; s < d.shards; s++ {
		c.AddItem(l.item(d, key, h, uint32(s)), -1, false)
	}
}
