package bucket

// A limit's arithmetic outside Take (limit.go): projection (backwards too,
// across centuries), fullness, credit, the wait until full.

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestFullAndCredit(t *testing.T) {
	l := &Limit{Kind: TokenBucket, Rate: 10, Period: M, Capacity: 10}
	d := l.Take(l.Fresh(t0, 0), t0, 3, false)
	if l.Full(d.Next, t0+17*S) || !l.Full(d.Next, t0+18*S) {
		t.Fatal("token bucket should be full exactly after 18 s")
	}
	if c := l.Credit(d.Next, t0, 100); c.Value != 10 {
		t.Fatalf("credit capped = %v", c.Value)
	}
	fw := &Limit{Kind: FixedWindow, Rate: 5, Period: M, Capacity: 10}
	s := fw.Fresh(t0, 0)
	s = fw.Take(s, s.TS, 10, false).Next
	if fw.Full(s, s.TS+M) || !fw.Full(s, s.TS+2*M) {
		t.Fatal("fixed window should be full after two windows")
	}
}

func TestClockBackwards(t *testing.T) {
	for _, kind := range []Kind{TokenBucket, FixedWindow} {
		l := &Limit{Kind: kind, Rate: 10, Period: M, Capacity: 10}
		s := l.Fresh(t0, 0)
		d := l.Take(s, t0, 4, false)
		back := l.Project(d.Next, t0-30*S)
		if back.Value != 6 || back.TS != d.Next.TS {
			t.Fatalf("%v: projected backwards = %+v, want value 6, ts %d", kind, back, d.Next.TS)
		}
		d2 := l.Take(d.Next, t0-30*S, 1, false)
		if !d2.OK || d2.Next.TS != d.Next.TS || d2.Next.Value != 5 {
			t.Fatalf("%v: take backwards = %+v", kind, d2)
		}
	}
}

// Waits computed while the clock is behind ts count the time until ts.
func TestWaitsAfterClockWentBack(t *testing.T) {
	l := &Limit{Kind: TokenBucket, Rate: 10, Period: M, Capacity: 10}
	s := l.Take(l.Fresh(t0, 0), t0, 10, false).Next // empty at t0
	back := t0 - 30*S
	if got := l.UntilFull(s, back); got != 90*S {
		t.Fatalf("UntilFull from 30 s before ts = %v, want 90 s", got)
	}
	d := l.Take(s, back, 1, false)
	if d.OK || d.RetryAfter != 36*S {
		t.Fatalf("denial from 30 s before ts = %+v, want retry 36 s", d)
	}
}

// Elapsed time and window starts are exact across any two int64 times: a
// jump of more than 292 years (which wraps an int64 difference) refills a
// bucket instead of draining it, and waits computed near the end of int64
// time saturate instead of wrapping.
func TestCenturiesApart(t *testing.T) {
	const y1700, y2250 = -8_520_336_000_000_000_000, 8_835_955_200_000_000_000
	for _, k := range []Kind{TokenBucket, FixedWindow} {
		l := &Limit{Kind: k, Rate: 10, Period: M, Capacity: 10}
		s := l.Fresh(y1700, 0)
		d := l.Take(s, y1700, 10, false)
		if !d.OK {
			t.Fatalf("kind %d: take 10 of a fresh bucket denied", k)
		}
		if p := l.Project(d.Next, y2250); p.Value != 10 || p.TS > y2250 || y2250-p.TS >= l.Period {
			t.Errorf("kind %d: 550 years later: %+v, want full with ts in the window of now", k, p)
		}
		late := int64(math.MaxInt64 - 5)
		d = l.Take(l.Fresh(late, 0), late, 10, false)
		if dd := l.Take(d.Next, late, 1, false); dd.OK || dd.RetryAfter <= 0 || dd.RetryAfter > maxWait {
			t.Errorf("kind %d: near the end of int64 time: %+v", k, dd)
		}
	}
	l := &Limit{Kind: FixedWindow, Rate: 1, Period: 100 * 365 * 24 * H, Capacity: 1}
	if start := l.WindowStart(y1700, 0); start > y1700 {
		t.Errorf("window start %d after now %d", start, y1700)
	}
}

// MostFitting is exactly Fits's bound: it fits, the next double up does
// not, including where capacity + MaxReserved rounds above it.
func TestMostFitting(t *testing.T) {
	cases := []struct {
		l       Limit
		reserve bool
		two     bool
		want    float64 // 0: only check the bound's exactness
	}{
		{Limit{Kind: TokenBucket, Rate: 10, Period: M, Capacity: 10}, false, false, 10},
		{Limit{Kind: TokenBucket, Rate: 10, Period: M, Capacity: 10, MaxReserved: 5}, true, false, 15},
		{Limit{Kind: TokenBucket, Rate: 10, Period: M, Capacity: 10, MaxReserved: 5}, false, false, 10},
		{Limit{Kind: FixedWindow, Rate: 10, Period: M, Capacity: 10}, false, true, 20},
		{Limit{Kind: TokenBucket, Rate: 1, Period: H, Capacity: 1, MaxReserved: 0.1}, true, false, 0}, // 1.1 rounds above it
		{Limit{Kind: TokenBucket, Rate: 8.0 / 6, Period: M, Capacity: 8.0 / 6, MaxReserved: 4.0 / 6}, true, true, 0},
		{Limit{Kind: TokenBucket, Rate: 10, Period: M, Capacity: 10}, true, false, math.Inf(1)}, // unlimited debt
	}
	for i, c := range cases {
		got := c.l.MostFitting(c.reserve, c.two)
		if c.want != 0 && got != c.want {
			t.Errorf("case %d: MostFitting = %v, want %v", i, got, c.want)
		}
		if math.IsInf(got, 1) {
			continue
		}
		if !c.l.Fits(got, c.reserve, c.two) || c.l.Fits(math.Nextafter(got, math.Inf(1)), c.reserve, c.two) {
			t.Errorf("case %d: %v is not Fits's bound", i, got)
		}
	}
	if l := (Limit{Kind: TokenBucket, Rate: 1, Period: H, Capacity: 1, MaxReserved: 0.1}); l.MostFitting(true, false) >= 1.1 {
		t.Error("1.1 fits a bucket of capacity 1 and debt 0.1, which Try refuses")
	}
}

// TestUntilFullProjected checks that UntilFullProjected of a state
// projected to now (Project's result, or Try's next state) is UntilFull
// of it, which projects it again: projecting at one reading is
// idempotent. The states are drawn around now, with the clock behind ts
// too, under both kinds, with debt, and above Capacity.
func TestUntilFullProjected(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 200000; i++ {
		l := &Limit{Kind: Kind(1 + rng.IntN(2)), Rate: 0.1 + rng.Float64()*1000, Period: 1 + rng.Int64N(10*S),
			Capacity: 1 + rng.Float64()*1000, MaxReserved: rng.Float64() * 100}
		now := t0 + rng.Int64N(20*S) - 10*S
		s := State{Value: (rng.Float64()*2 - 0.5) * l.Capacity, TS: t0}
		if l.Kind == FixedWindow {
			s.TS = l.WindowStart(t0, 0)
		}
		p := l.Project(s, now)
		if got, want := l.UntilFullProjected(p, now), l.UntilFull(p, now); got != want {
			t.Fatalf("%+v, %+v at %d: UntilFullProjected = %d, UntilFull = %d", l, p, now, got, want)
		}
		next, _ := l.Try(s, now, rng.Float64()*l.Capacity, rng.IntN(2) == 0)
		if got, want := l.UntilFullProjected(next, now), l.UntilFull(next, now); got != want {
			t.Fatalf("%+v, next %+v at %d: UntilFullProjected = %d, UntilFull = %d", l, next, now, got, want)
		}
	}
}
