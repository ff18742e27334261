package ratelimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/seed7fbd42b6/ratelimit"
	"github.com/seed7fbd42b6/ratelimit/ratelimittest"
)

// FuzzClockNeverMints drains a bucket, moves the clock to any time at all
// (outside the int64-nanosecond years included) and counts the grants:
// never more than the refill since the drain allows, so a clock jumping
// back mints nothing.
func FuzzClockNeverMints(f *testing.F) {
	f.Add(int64(-11_676_096_000), int64(0), uint8(1)) // the year 1600: once read as 2184
	f.Add(int64(1_700_000_000), int64(0), uint8(2))
	f.Add(int64(253_402_300_799), int64(999_999_999), uint8(1)) // the year 9999
	f.Add(int64(1_699_999_999), int64(999_999_999), uint8(2))
	f.Fuzz(func(t *testing.T, sec, nsec int64, kind uint8) {
		if kind < 1 || kind > 2 || nsec < 0 || nsec >= 1e9 {
			t.Skip()
		}
		t0 := time.Unix(1_700_000_000, 0)
		clk := ratelimittest.NewClock(t0)
		const capacity, rate = 10, 10
		l, err := ratelimit.Open(ratelimit.Options{Now: clk.Now, Limits: map[string]ratelimit.Config{
			"x": {Kind: ratelimit.Kind(kind), Rate: rate, Period: time.Hour, Capacity: capacity},
		}})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ctx := context.Background()
		if st, err := l.Limit(ctx, ratelimit.Request{Name: "x", Count: capacity}); err != nil || !st.OK {
			t.Fatalf("drain: %+v, %v", st, err)
		}
		at := time.Unix(sec, nsec)
		clk.Set(at)
		granted := 0
		for ; granted <= capacity; granted++ {
			st, err := l.Limit(ctx, ratelimit.Request{Name: "x"})
			if err != nil {
				t.Fatal(err)
			}
			if !st.OK {
				break
			}
		}
		if !at.After(t0) && granted > 0 {
			t.Fatalf("clock set back to %v (from %v): %d grants from a drained bucket", at, t0, granted)
		}
		if granted > capacity {
			t.Fatalf("clock set to %v: more than the capacity granted", at)
		}
	})
}
