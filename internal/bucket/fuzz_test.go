package bucket

import (
	"math"
	"testing"
)

// FuzzWaits checks, for any state, clock and limit, that every wait the
// arithmetic returns is in [0, maxWait], and that a denial's RetryAfter is
// exact: the same request succeeds at now+RetryAfter (unless saturated)
// and not a nanosecond earlier, and that GrantAt is that reading, from
// which every later reading's RetryAfter follows.
func FuzzWaits(f *testing.F) {
	// A clock back more than 146 years with a rate near the smallest
	// float: the two waits of UntilFull once summed past the int64 range.
	f.Add(int64(-4_700_000_000*S), int64(1_700_000_000*S), 5e-324, int64(M), 1.0, 0.0, 1.0, false, uint8(TokenBucket))
	f.Add(t0, t0, 10.0, int64(M), 10.0, 3.0, 4.0, false, uint8(TokenBucket))
	f.Add(t0, t0+7*S, 7.0, int64(3*S), 7.0, -2.0, 5.0, true, uint8(FixedWindow))
	f.Fuzz(func(t *testing.T, now, ts int64, rate float64, period int64, capacity, value, count float64, reserve bool, kind uint8) {
		if !(rate > 0) || math.IsInf(rate, 0) || period <= 0 || !(capacity > 0) || math.IsInf(capacity, 0) ||
			math.IsNaN(value) || math.IsInf(value, 0) || !(count >= 0) || math.IsInf(count, 0) || kind < 1 || kind > 2 {
			t.Skip()
		}
		l := &Limit{Kind: Kind(kind), Rate: rate, Period: period, Capacity: capacity}
		s := State{Value: min(value, capacity), TS: ts}
		if l.Kind == FixedWindow {
			s.TS = l.WindowStart(ts, 0)
		}
		if w := l.UntilFull(s, now); w < 0 || w > maxWait {
			t.Fatalf("UntilFull = %d", w)
		} else if p := l.Project(s, now); l.UntilFullProjected(p, now) != l.UntilFull(p, now) {
			t.Fatalf("UntilFullProjected(%+v) = %d, UntilFull = %d: projecting again changed it", p, l.UntilFullProjected(p, now), l.UntilFull(p, now))
		}
		d := l.Take(s, now, count, reserve)
		if d.RetryAfter < 0 || d.RetryAfter > maxWait {
			t.Fatalf("RetryAfter = %d", d.RetryAfter)
		}
		if d.OK || d.RetryAfter >= maxWait || now > math.MaxInt64-d.RetryAfter {
			return
		}
		if count > l.MaxCount(reserve) {
			return // can never succeed: the wait saturates or is a bound
		}
		if _, ok := l.Try(s, now+d.RetryAfter, count, reserve); !ok {
			t.Fatalf("denied %+v at %d: retry after %d still denied", s, now, d.RetryAfter)
		}
		if d.RetryAfter > 0 {
			if _, ok := l.Try(s, now+d.RetryAfter-1, count, reserve); ok {
				t.Fatalf("denied %+v at %d: retry after %d is late by at least 1 ns", s, now, d.RetryAfter)
			}
		}
		at, ok := l.GrantAt(s, now, count, reserve)
		if !ok || at != now+d.RetryAfter {
			t.Fatalf("denied %+v at %d: GrantAt = %d, %v; want %d", s, now, at, ok, now+d.RetryAfter)
		}
		for _, later := range []int64{now + d.RetryAfter/3, now + d.RetryAfter/2, at - 1} {
			if later < now || later >= at {
				continue
			}
			if w := l.Take(s, later, count, reserve).RetryAfter; w != at-later {
				t.Fatalf("denied %+v at %d, granted from %d: RetryAfter at %d is %d, want %d", s, now, at, later, w, at-later)
			}
		}
	})
}
