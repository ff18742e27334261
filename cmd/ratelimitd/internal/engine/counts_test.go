package engine

import (
	"math"
	"testing"
	"time"

	"github.com/seed7fbd42b6/ratelimit"
)

func TestMaxTotal(t *testing.T) {
	cases := []struct {
		c       ratelimit.Config
		reserve bool
		total   float64
	}{
		{ratelimit.Config{Rate: 10}, false, 10},
		{ratelimit.Config{Rate: 10, Capacity: 20}, false, 20},
		{ratelimit.Config{Rate: 10}, true, math.Inf(1)},
		{ratelimit.Config{Rate: 10, MaxReserved: 4}, true, 14},
		{ratelimit.Config{Rate: 10, Shards: 4}, false, 10},
		{ratelimit.Config{Rate: 10, Shards: 4, MaxReserved: 8}, true, 18},
	}
	for _, c := range cases {
		if got := maxTotal(c.c, c.reserve); got != c.total {
			t.Errorf("maxTotal(%+v, %v) = %v, want %v", c.c, c.reserve, got, c.total)
		}
	}
}

func TestWindowEnd(t *testing.T) {
	cases := []struct {
		now    time.Time
		period time.Duration
		want   time.Duration
	}{
		{t0, time.Minute, time.Minute},
		{t0.Add(20 * time.Second), time.Minute, 40 * time.Second},
		{t0.Add(time.Nanosecond), time.Second, time.Second - time.Nanosecond},
		{time.Unix(0, 0).Add(3 * time.Hour), 24 * time.Hour, 21 * time.Hour},
		{t0, 0, 0},
	}
	for _, c := range cases {
		if got := windowEnd(c.now, c.period); got != c.want {
			t.Errorf("windowEnd(%v, %v) = %v, want %v", c.now, c.period, got, c.want)
		}
	}
}
