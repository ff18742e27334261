package bucket

// Take (take.go): the worked cases of SEMANTICS.md, waits that are never
// early, debt that stays finite.

import (
	"math"
	"testing"
)

// The worked cases of SEMANTICS.md, token bucket {rate 10, period M}.
func TestTokenBucketWorked(t *testing.T) {
	l := &Limit{Kind: TokenBucket, Rate: 10, Period: M, Capacity: 10}
	run(t, l, l.Fresh(t0, 0), []step{
		{at: t0, count: 5, ok: true, value: 5},
		{at: t0 + 6*S, count: 6, ok: true, value: 0},
		{at: t0 + 6*S, count: 10, ok: false, value: 0, retry: 60 * S},
	})
}

func TestTokenBucketReservationsWorked(t *testing.T) {
	l := &Limit{Kind: TokenBucket, Rate: 10, Period: M, Capacity: 10}
	run(t, l, l.Fresh(t0, 0), []step{
		{at: t0, count: 5, ok: true, value: 5},
		{at: t0 + 6*S, count: 16, reserve: true, ok: true, value: -10, retry: 60 * S},
		{at: t0 + 36*S, count: 5, reserve: true, ok: true, value: -10, retry: 60 * S},
	})
}

func TestFixedWindowReservationsWorked(t *testing.T) {
	l := &Limit{Kind: FixedWindow, Rate: 10, Period: M, Capacity: 10}
	phase := Phase(uint64(t0), M) // windows start at t0
	s := l.Fresh(t0, phase)
	if s.TS != t0 {
		t.Fatalf("fresh ts = %d, want t0", s.TS)
	}
	run(t, l, s, []step{
		{at: t0, count: 5, ok: true, value: 5},
		{at: t0 + 60*S, count: 16, reserve: true, ok: true, value: -6, retry: 60 * S},
		{at: t0 + 90*S, count: 5, reserve: true, ok: true, value: -11, retry: 90 * S},
	})
}

func TestMaxReservedWorked(t *testing.T) {
	l := &Limit{Kind: TokenBucket, Rate: 1, Period: H, Capacity: 1, MaxReserved: 1}
	s := l.Fresh(t0, 0)
	d := l.Take(s, t0, 2, true)
	if !d.OK || d.RetryAfter != H {
		t.Fatalf("limit 2 reserve = %+v, want ok, retry 1h", d)
	}
	d2 := l.Take(d.Next, t0, 1, false)
	if d2.OK || d2.RetryAfter <= d.RetryAfter || d2.RetryAfter != 2*H {
		t.Fatalf("limit 1 = %+v, want denied with retry 2h", d2)
	}
	// A reservation beyond maxReserved is denied until it fits.
	d3 := l.Take(d.Next, t0, 1, true)
	if d3.OK || d3.RetryAfter != H {
		t.Fatalf("reserve 1 over maxReserved = %+v, want denied, retry 1h", d3)
	}
	if l.MaxCount(false) != 1 || l.MaxCount(true) != 2 {
		t.Fatalf("MaxCount = %v/%v", l.MaxCount(false), l.MaxCount(true))
	}
}

// RetryAfter is exact: a retry at now+RetryAfter succeeds, one nanosecond
// earlier fails, for awkward rates where float rounding bites.
func TestRetryAfterNeverEarly(t *testing.T) {
	for _, kind := range []Kind{TokenBucket, FixedWindow} {
		for _, rate := range []float64{7, 3, 0.1, 1e6, 13.37} {
			for _, period := range []int64{3 * S, 7 * S, 1, 999_999_937} {
				l := &Limit{Kind: kind, Rate: rate, Period: period, Capacity: math.Max(rate, 1)}
				s := l.Fresh(t0+123, 17%period)
				now := t0 + 123
				// Drain, then ask for more than is left.
				d := l.Take(s, now, l.Capacity, false)
				if !d.OK {
					t.Fatalf("%v rate %v: could not drain", kind, rate)
				}
				s = d.Next
				ask := l.Capacity * 0.75
				den := l.Take(s, now, ask, false)
				if den.OK {
					continue // refilled within the same instant (period 1)
				}
				if !l.Take(s, now+den.RetryAfter, ask, false).OK {
					t.Errorf("%v rate %v period %d: retry at +%d fails", kind, rate, period, den.RetryAfter)
				}
				if den.RetryAfter > 0 && l.Take(s, now+den.RetryAfter-1, ask, false).OK {
					t.Errorf("%v rate %v period %d: retry at +%d-1ns already succeeds", kind, rate, period, den.RetryAfter)
				}
			}
		}
	}
}

func TestFixedWindowRefillsInSteps(t *testing.T) {
	l := &Limit{Kind: FixedWindow, Rate: 10, Period: M, Capacity: 10}
	s := l.Fresh(t0+10*S, Phase(uint64(t0), M))
	d := l.Take(s, t0+10*S, 10, false)
	if got := l.Project(d.Next, t0+59*S).Value; got != 0 {
		t.Fatalf("value before the window ends = %v, want 0", got)
	}
	if got := l.Project(d.Next, t0+60*S); got.Value != 10 || got.TS != t0+60*S {
		t.Fatalf("value at the next window = %+v", got)
	}
	den := l.Take(d.Next, t0+10*S, 1, false)
	if den.OK || den.RetryAfter != 50*S {
		t.Fatalf("denial = %+v, want retry 50s", den)
	}
}

func TestHugeDebtDoesNotOverflow(t *testing.T) {
	l := &Limit{Kind: TokenBucket, Rate: 1, Period: H, Capacity: 1}
	d := l.Take(l.Fresh(t0, 0), t0, 1e300, true)
	if !d.OK || d.RetryAfter != maxWait {
		t.Fatalf("huge reservation = %+v", d)
	}
	fw := &Limit{Kind: FixedWindow, Rate: 1, Period: H, Capacity: 1}
	d = fw.Take(fw.Fresh(t0, 0), t0, 1e300, true)
	if !d.OK || d.RetryAfter != maxWait {
		t.Fatalf("huge fixed-window reservation = %+v", d)
	}
}

// A reservation whose debt would leave float64's range is denied: -Inf
// could never be repaid (-Inf + Inf is NaN).
func TestDebtStaysFinite(t *testing.T) {
	l := &Limit{Kind: TokenBucket, Rate: 1e308, Period: 1, Capacity: 1e308}
	s := State{Value: -1e308, TS: 0}
	if d := l.Take(s, 0, 1.7e308, true); d.OK || math.IsInf(d.Next.Value, 0) {
		t.Fatalf("reserve 1.7e308 on a debt of 1e308: %+v, want denied", d)
	}
	if d := l.Take(s, 5, 1.7e308, true); !d.OK {
		t.Fatalf("after repayment: %+v, want granted", d)
	}
	p := l.TakeTwo(s, s, 0, 1.7e308, true) // halves of -1.85e308 each
	if p.OK || math.IsInf(p.A.Value, 0) || math.IsInf(p.B.Value, 0) {
		t.Fatalf("split of 1.7e308 over two debts of 1e308: %+v, want denied", p)
	}
}

func TestSettleFindsTheLeastWait(t *testing.T) {
	for _, tc := range []struct {
		name         string
		guess, least int64
	}{
		{"exact guess", 500, 500},
		{"late by one", 501, 500},
		{"late by far more than rounding", 1_000_000, 500},
		{"early", 3, 500},
		{"least is zero", 77, 0},
		{"guess negative", -9, 500},
		{"beyond the cap", maxWait + 5, 500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			ok := func(d int64) bool { calls++; return d >= tc.least }
			if got := settle(tc.guess, ok); got != tc.least {
				t.Fatalf("settle(%d) = %d, want %d", tc.guess, got, tc.least)
			}
			if tc.guess == tc.least+1 && calls > 3 {
				t.Errorf("a guess late by one took %d calls", calls)
			}
		})
	}
	if got := settle(10, func(int64) bool { return false }); got != maxWait {
		t.Errorf("never ok: settle = %d, want maxWait", got)
	}
}

func TestGrantAtIsWhereWaitsPoint(t *testing.T) {
	l := &Limit{Kind: TokenBucket, Rate: 3, Period: S, Capacity: 10}
	s := State{Value: 0.5, TS: t0}
	at, ok := l.GrantAt(s, t0, 2, false)
	if !ok {
		t.Fatal("GrantAt of a denied request: not ok")
	}
	for _, now := range []int64{t0, t0 + 1, t0 + 123_456_789, at - 1} {
		d := l.Take(s, now, 2, false)
		if d.OK || d.RetryAfter != at-now {
			t.Errorf("at %d: %+v, want denied with RetryAfter %d", now, d, at-now)
		}
	}
	if d := l.Take(s, at, 2, false); !d.OK {
		t.Errorf("at GrantAt: denied")
	}
	for _, tc := range []struct {
		name    string
		s       State
		count   float64
		reserve bool
	}{
		{"granted now", State{Value: 5, TS: t0}, 2, false},
		{"never granted", s, 11, false},
	} {
		if _, ok := l.GrantAt(tc.s, t0, tc.count, tc.reserve); ok {
			t.Errorf("%s: GrantAt ok", tc.name)
		}
	}
}
