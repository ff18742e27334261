package ratelimit

import "github.com/seed7fbd42b6/ratelimit/actor"

type actorPartition = actor.Partition
