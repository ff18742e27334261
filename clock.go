package ratelimit

import (
	"math"
	"sync/atomic"
	"time"
)

// wallClock is the default clock: the wall clock, read through the
// monotonic clock and set again from the wall clock once a second.
// time.Now reads both clocks; reading the monotonic one alone (time.Since)
// costs about half, and a partition reads the clock once per batch, so at
// low concurrency once per decision. Between two settings the reading
// follows the wall clock's rate (the monotonic clock is slewed with it) but
// not its steps; a step back shows at the next setting as a clock going
// backwards, which mints nothing.
type wallClock struct {
	base atomic.Pointer[clockBase]
}

type clockBase struct {
	at   time.Time // with its monotonic reading
	wall int64     // at, in Unix nanoseconds
}

// resetEvery is how often wallClock takes the wall clock again.
const resetEvery = time.Second

func newWallClock() *wallClock {
	c := new(wallClock)
	c.reset()
	return c
}

func (c *wallClock) reset() int64 {
	t := time.Now()
	c.base.Store(&clockBase{at: t, wall: unixNano(t)})
	return unixNano(t)
}

// now returns the time in Unix nanoseconds. Safe for concurrent use.
func (c *wallClock) now() int64 {
	b := c.base.Load()
	d := time.Since(b.at)
	if d < 0 || d >= resetEvery {
		return c.reset()
	}
	if b.wall > math.MaxInt64-int64(d) {
		return math.MaxInt64
	}
	return b.wall + int64(d)
}

// unixNano is t in Unix nanoseconds, saturating at the ends of the int64
// range (the years 1678 and 2262) where t.UnixNano would wrap around.
func unixNano(t time.Time) int64 {
	switch {
	case t.Before(minTime):
		return math.MinInt64
	case t.After(maxTime):
		return math.MaxInt64
	}
	return t.UnixNano()
}

// The earliest and latest times whose Unix nanoseconds fit an int64.
var (
	minTime = time.Unix(0, math.MinInt64)
	maxTime = time.Unix(0, math.MaxInt64)
)
