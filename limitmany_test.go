package ratelimit

// LimitMany: independent decisions, each alone, appended to out.

import (
	"errors"
	"math"
	"testing"
	"time"
)

// LimitMany decides each request alone, errors included, appending to
// out[:0] (reusing its array); the same bucket twice is decided in order.
func TestLimitMany(t *testing.T) {
	clk := newClock()
	l := open(t, Options{Now: clk.Now, Limits: limitAllLimits()})
	limit(t, l, Request{Name: "b", Key: "k", Count: 5})
	rs := []Request{
		{Name: "a", Key: "k", Count: 3},
		{Name: "b", Key: "k", Count: 1},
		{Name: "nope", Key: "k"},
		{Name: "a", Key: "k", Count: 11},
		{Name: "w", Key: "k", Count: 2},
		{Name: "s", Key: "k", Count: 15},
		{Name: "a", Key: "k", Count: math.NaN()},
	}
	out := make([]Decision, 3, 16)
	for i := range out {
		out[i] = Decision{Status: Status{OK: true, Limit: "junk"}, Err: errors.New("junk")}
	}
	ds := l.LimitMany(bg, rs, out)
	if len(ds) != len(rs) {
		t.Fatalf("LimitMany returned %d decisions for %d requests", len(ds), len(rs))
	}
	if &ds[0] != &out[:1][0] {
		t.Errorf("LimitMany did not append to out[:0] (new backing array although cap sufficed)")
	}
	check := func(i int, ok bool, retry time.Duration, err error) {
		t.Helper()
		d := ds[i]
		if err != nil {
			if !errors.Is(d.Err, err) {
				t.Errorf("decision %d (%s): Err = %v, want %v", i, reqString(rs[i]), d.Err, err)
			}
			return
		}
		if d.Err != nil || d.OK != ok || d.RetryAfter != retry {
			t.Errorf("decision %d (%s) = %+v, want OK %v RetryAfter %v", i, reqString(rs[i]), d, ok, retry)
		}
	}
	check(0, true, 0, nil)
	check(1, false, 12*S, nil)
	check(2, false, 0, ErrUnknownLimit)
	check(3, false, 0, ErrInvalidCount)
	check(4, true, 0, nil)
	check(5, true, 0, nil)
	check(6, false, 0, ErrInvalidCount)
	wantValue(t, l, "a", "k", 7)
	wantValue(t, l, "b", "k", 0)
	wantValue(t, l, "w", "k", 2)
	wantValue(t, l, "s", "k", 25)

	t.Run("nil out and empty input", func(t *testing.T) {
		if ds := l.LimitMany(bg, nil, nil); len(ds) != 0 {
			t.Errorf("LimitMany(nil) = %+v", ds)
		}
		ds := l.LimitMany(bg, []Request{{Name: "a", Key: "n"}}, nil)
		if len(ds) != 1 || !ds[0].OK || ds[0].Err != nil {
			t.Errorf("LimitMany one = %+v", ds)
		}
	})
	t.Run("same bucket twice: exactly one fits", func(t *testing.T) {
		ds := l.LimitMany(bg, []Request{{Name: "a", Key: "dup", Count: 6}, {Name: "a", Key: "dup", Count: 6}}, nil)
		if len(ds) != 2 || ds[0].Err != nil || ds[1].Err != nil || ds[0].OK == ds[1].OK {
			t.Errorf("two requests of 6 on capacity 10 = %+v, want exactly one granted", ds)
		}
		wantValue(t, l, "a", "dup", 4)
	})
}
