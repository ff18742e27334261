package redislimit

import (
	"fmt"
	"math"
	"time"

	"github.com/seed7fbd42b6/ratelimit"
	"github.com/seed7fbd42b6/ratelimit/internal/bucket"
)

// Times cross to the function as (us, rem): whole microseconds since the
// Unix epoch and the nanoseconds beyond them (0 <= rem < 1000), two
// integers a double holds exactly. The function's clock must lie in
// [0, maxClockUs) microseconds, and a fixed window's period in
// [MinWindow, MaxWindow]: within those bounds every difference and product
// of times the arithmetic needs stays below 2^53 (see script.lua).
const maxClockUs = 1 << 52 // 2112-09-17: the latest clock reading the function accepts

// The shortest and the longest fixed window the store decides exactly;
// other periods are ratelimit.ErrInvalidConfig.
const (
	MinWindow = time.Microsecond
	MaxWindow = time.Duration(1<<50) * time.Microsecond // about 35.7 years
)

// split returns ns as (us, rem).
func split(ns int64) (us, rem float64) {
	q, r := ns/1000, ns%1000
	if r < 0 {
		q, r = q-1, r+1000
	}
	return float64(q), float64(r)
}

// join is the inverse of split; false if (us, rem) is not a time the
// function can have produced.
func join(us, rem float64) (int64, bool) {
	if us != math.Trunc(us) || math.Abs(us) >= 1<<53 || rem != math.Trunc(rem) || rem < 0 || rem >= 1000 {
		return 0, false
	}
	q := int64(us)
	if q > (math.MaxInt64-999)/1000 || q < math.MinInt64/1000 {
		return 0, false
	}
	return q*1000 + int64(rem), true
}

// clockInRange reports whether ns is a clock reading the function accepts.
func clockInRange(ns int64) bool { return ns >= 0 && ns < maxClockUs*1000 }

// errClockRange is the item error of a request decided at a clock
// reading (Options.Now) outside what the store represents.
var errClockRange = fmt.Errorf("redislimit: clock outside the years 1970 to 2112")

// checkLimit reports, wrapping ratelimit.ErrInvalidConfig, a limit the
// function cannot decide exactly.
func checkLimit(name string, l *bucket.Limit) error {
	return checkWindow(name, l.Kind == bucket.FixedWindow, time.Duration(l.Period))
}

// checkWindow is checkLimit for a limit of that kind and period.
func checkWindow(name string, fixed bool, p time.Duration) error {
	if fixed && (p < MinWindow || p > MaxWindow) {
		return fmt.Errorf("%w: limit %q: a fixed window of %v cannot be decided exactly on Redis, whose function holds times as doubles (fixed windows from %v to %v)",
			ratelimit.ErrInvalidConfig, name, p, MinWindow, MaxWindow)
	}
	return nil
}

// CheckLimit is checkLimit, for package ratelimit (store.LimitChecker):
// SetLimits refuses what the store cannot decide.
func (s *redisStore) CheckLimit(name string, l *bucket.Limit) error { return checkLimit(name, l) }

// unixNano is t in Unix nanoseconds, saturating at the ends of the int64
// range as package ratelimit does.
func unixNano(t time.Time) int64 {
	switch {
	case t.Before(time.Unix(0, math.MinInt64)):
		return math.MinInt64
	case t.After(time.Unix(0, math.MaxInt64)):
		return math.MaxInt64
	}
	return t.UnixNano()
}
