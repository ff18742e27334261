package engine

import (
	"math"
	"time"

	"github.com/seed7fbd42b6/ratelimit"
)

// maxTotal is the most one request can be granted of one bucket (every
// shard of a key) across several of its descriptors.
func maxTotal(c ratelimit.Config, reserve bool) float64 {
	return shardMax(c, reserve) * float64(shards(c))
}

func shardMax(c ratelimit.Config, reserve bool) float64 {
	n := float64(shards(c))
	capacity := c.Capacity
	if capacity == 0 {
		capacity = c.Rate
	}
	debt := 0.0
	if reserve {
		debt = math.Inf(1)
		if c.MaxReserved > 0 {
			debt = c.MaxReserved / n
		}
	}
	return capacity/n + debt
}

func shards(c ratelimit.Config) int { return max(c.Shards, 1) }

// windowEnd is how long until the window that contains now ends, for
// windows of period aligned to the Unix epoch.
func windowEnd(now time.Time, period time.Duration) time.Duration {
	if period <= 0 {
		return 0
	}
	off := time.Duration(now.UnixNano() % int64(period))
	if off < 0 {
		off += period
	}
	return period - off
}
