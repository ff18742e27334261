package ratelimit

import (
	"math"

	"github.com/seed7fbd42b6/ratelimit/internal/actor"
)

type actorPartition = actor.Partition

// shardValues reads every shard of (name, key), projected to now.
func shardValues(t interface{ Fatal(...any) }, l *Limiter, name, key string) []float64 {
	d, err := l.resolve(name, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := actor.NewCall()
	defer c.Release()
	l.addShards(c, d, key)
	l.group.Peek(c)
	now := l.now()
	vs := make([]float64, d.shards)
	for i := range c.Items {
		vs[c.Items[i].ID.Shard] = d.perShard.Project(c.Items[i].State, now).Value
	}
	return vs
}

func nan() float64 { return math.NaN() }
func inf() float64 { return math.Inf(1) }
