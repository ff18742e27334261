package ratelimit

// The clock going back (nothing minted, nothing lost, a bucket's ts never
// moves back) and jumping far, both ways. The model tests (model_test.go)
// move the clock back at random too.

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/seed7fbd42b6/ratelimit/ratelimittest"
)

// Scripted steps back and forth: values never fall or rise by going back,
// and a bucket first seen while behind refills from there.
func TestClockBackwards(t *testing.T) {
	t.Run("token bucket", func(t *testing.T) {
		clk := newClock()
		l := open(t, Options{Now: clk.Now, Limits: map[string]Config{"t": tb(10, M)}})
		limit(t, l, Request{Name: "t", Count: 5})
		clk.Set(t0.Add(-30 * S))
		wantValue(t, l, "t", "", 5) // not 0: going back destroys nothing
		clk.Set(t0.Add(-10 * H))
		wantValue(t, l, "t", "", 5)
		clk.Set(t0.Add(-30 * S))
		if st := limit(t, l, Request{Name: "t", Count: 1}); !st.OK {
			t.Fatalf("denied: %+v", st)
		}
		wantValue(t, l, "t", "", 4)
		clk.Set(t0)
		v := wantValue(t, l, "t", "", 4) // ts stayed at t0: nothing minted
		if !v.TS.Equal(t0) {
			t.Errorf("TS = t0%+v, want t0 (never moves back)", v.TS.Sub(t0))
		}
		clk.Set(t0.Add(6 * S))
		wantValue(t, l, "t", "", 5)
		// back again, and a denial there writes nothing
		clk.Set(t0.Add(-M))
		if st := limit(t, l, Request{Name: "t", Count: 9}); st.OK {
			t.Errorf("granted 9 with 4 tokens: %+v", st)
		}
		clk.Set(t0.Add(12 * S))
		wantValue(t, l, "t", "", 6)
	})
	t.Run("fixed window", func(t *testing.T) {
		clk := newClock()
		l := open(t, Options{Now: clk.Now, Limits: map[string]Config{"f": fw(10, M, t0)}})
		limit(t, l, Request{Name: "f", Count: 10})
		clk.Set(t0.Add(60 * S))
		limit(t, l, Request{Name: "f", Count: 1})
		wantValue(t, l, "f", "", 9)
		clk.Set(t0.Add(30 * S))
		v := wantValue(t, l, "f", "", 9)
		if !v.TS.Equal(t0.Add(60 * S)) {
			t.Errorf("TS = t0%+v, want t0+60s (never moves back)", v.TS.Sub(t0))
		}
		clk.Set(t0.Add(-5 * M))
		wantValue(t, l, "f", "", 9)
		limit(t, l, Request{Name: "f", Count: 1})
		wantValue(t, l, "f", "", 8)
		clk.Set(t0.Add(119 * S))
		wantValue(t, l, "f", "", 8) // going back did not start a new window
		clk.Set(t0.Add(120 * S))
		wantValue(t, l, "f", "", 10)
	})
	t.Run("fresh bucket while behind", func(t *testing.T) {
		clk := newClock()
		l := open(t, Options{Now: clk.Now, Limits: map[string]Config{"t": tb(10, M)}})
		clk.Set(t0.Add(-H))
		wantValue(t, l, "t", "k", 10)
		limit(t, l, Request{Name: "t", Key: "k", Count: 10})
		clk.Set(t0.Add(-H + 6*S))
		wantValue(t, l, "t", "k", 1)
	})
}

// A bucket dropped as full (a sweep, here the memory-mode Snapshot; a
// credit that fills it does the same) at a later clock reading came back
// fresh, with an earlier ts, when the clock then stepped back: the refill
// between the two readings was counted twice. SEMANTICS: a clock going
// back mints nothing, and over any span granted <= capacity + rate *
// elapsed. A partition now holds a clock that went back at its latest
// reading.
func TestClockBackAfterDropMintsNothing(t *testing.T) {
	ctx := context.Background()
	for _, drop := range []string{"sweep", "credit"} {
		t.Run(drop, func(t *testing.T) {
			clk := newClock()
			l := open(t, Options{Now: clk.Now, Limits: map[string]Config{"t": tb(10, M)}})
			granted := 0.0
			take := func() {
				st, err := l.Limit(ctx, Request{Name: "t", Count: 10})
				if err != nil {
					t.Fatal(err)
				}
				if st.OK {
					granted += 10
				}
			}
			take() // t0: 10 granted, bucket empty
			clk.Set(t0.Add(60 * time.Second))
			if drop == "sweep" {
				if err := l.Snapshot(); err != nil { // full again: dropped
					t.Fatal(err)
				}
			} else if err := l.Credit(ctx, "t", "", 1); err != nil { // capped: full, dropped
				t.Fatal(err)
			}
			clk.Set(t0.Add(1 * time.Second)) // the clock steps back
			take()
			clk.Set(t0.Add(61 * time.Second))
			take()
			bound := 10 + 10*61.0/60 // capacity + rate * elapsed over [t0, t0+61s]
			if granted > bound {
				t.Errorf("granted %v tokens within [t0, t0+61s] of clock time, bound %.2f: a clock step back minted tokens", granted, bound)
			}
		})
	}
}

// SEMANTICS' bound for a restart behind a drop: the file keeps no clock,
// so a bucket dropped as full comes back after a restart fresh at the
// earlier clock and refills as that clock advances, where the process
// that dropped it counts no refill for time it has already counted. Over
// the minute the clock went back, the process grants the capacity alone
// (10); the restarted one that plus the minute's refill (20): no more than
// capacity + rate x the real time that passed.
func TestClockBackAcrossARestart(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		restart bool
		want    float64
	}{{false, 10}, {true, 20}} {
		t.Run(fmt.Sprintf("restart=%v", c.restart), func(t *testing.T) {
			clk := newClock()
			opts := Options{Now: clk.Now, Path: filepath.Join(t.TempDir(), "rl.db"), Limits: map[string]Config{"t": tb(10, M)}}
			l := open(t, opts)
			clk.Set(t0.Add(2 * M))
			grant(t, l, Request{Name: "t", Count: 10})
			if err := l.Credit(ctx, "t", "", 10); err != nil { // full: dropped
				t.Fatal(err)
			}
			if c.restart {
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
				l = open(t, opts)
			}
			granted := 0.0
			for at := t0.Add(M); !at.After(t0.Add(2 * M)); at = at.Add(6 * time.Second) {
				clk.Set(at) // the clock went back a minute, then runs on
				for {
					st, err := l.Limit(ctx, Request{Name: "t"})
					if err != nil {
						t.Fatal(err)
					}
					if !st.OK {
						break
					}
					granted++
				}
			}
			if granted != c.want {
				t.Errorf("granted %v over the minute the clock went back, want %v", granted, c.want)
			}
		})
	}
}

// A credit after the clock stepped back fills a bucket stamped later than
// now; dropped as full, it must come back full as of its stamp, not of
// now, or the refill between the two is counted again.
func TestClockBackThenCreditMintsNothing(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	l := open(t, Options{Now: clk.Now, Limits: map[string]Config{"t": tb(10, M)}})
	clk.Set(t0.Add(M))
	if st, err := l.Limit(ctx, Request{Name: "t", Count: 10}); err != nil || !st.OK {
		t.Fatal(st, err)
	}
	clk.Set(t0) // the clock steps back a minute
	if err := l.Credit(ctx, "t", "", 10); err != nil {
		t.Fatal(err)
	}
	if st, err := l.Limit(ctx, Request{Name: "t", Count: 10}); err != nil || !st.OK {
		t.Fatal(st, err)
	}
	clk.Set(t0.Add(M)) // back where the bucket was emptied: nothing refilled since
	st, err := l.Limit(ctx, Request{Name: "t", Count: 1})
	if err != nil || st.OK || st.RetryAfter != 6*time.Second {
		t.Fatalf("a minute after the credited bucket was emptied at an earlier reading: %+v, %v; want a denial for 6s", st, err)
	}
}

// Clock going backwards far and forwards far (within ±100 years, no
// overflow): nothing minted, nothing lost, ts never moves back.
func TestClockFarJumpsWithinRange(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	l := open(t, Options{Now: clk.Now, Limits: map[string]Config{"tb": tb(10, time.Minute), "fw": fw(10, time.Minute, time.Time{})}})
	for _, n := range []string{"tb", "fw"} {
		if st, _ := l.Limit(ctx, Request{Name: n, Key: "k", Count: 10}); !st.OK {
			t.Fatal("denied")
		}
	}
	clk.Set(t0.AddDate(-50, 0, 0))
	for _, n := range []string{"tb", "fw"} {
		if st, _ := l.Limit(ctx, Request{Name: n, Key: "k", Count: 1}); st.OK || st.RetryAfter <= 0 {
			t.Errorf("%s 50 years back: %+v, want denied", n, st)
		}
		if v := value(t, l, n, "k"); v.Value != 0 {
			t.Errorf("%s 50 years back: value %v", n, v.Value)
		}
	}
	clk.Set(t0.AddDate(100, 0, 0))
	for _, n := range []string{"tb", "fw"} {
		if v := value(t, l, n, "k"); v.Value != 10 {
			t.Errorf("%s 100 years on: value %v, want 10", n, v.Value)
		}
	}
}

// Elapsed time was now - ts in int64 nanoseconds, which wraps for a jump
// of more than ~292 years between two valid clock readings (UnixNano is
// defined for 1678..2262): a token bucket then lost tokens and a fixed
// window never refilled. Likewise WindowStart wrapped near 1678 and put a
// fresh window's start after now.
func TestClockJumpsOverCenturies(t *testing.T) {
	ctx := context.Background()
	y1700 := time.Date(1700, 1, 1, 0, 0, 0, 0, time.UTC)
	y2250 := time.Date(2250, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, cfg := range []Config{tb(10, time.Minute), fw(10, time.Minute, time.Time{})} {
		t.Run(cfg.Kind.String(), func(t *testing.T) {
			clk := ratelimittest.NewClock(y1700)
			l := open(t, Options{Now: clk.Now, Limits: map[string]Config{"x": cfg}})
			if st, err := l.Limit(ctx, Request{Name: "x", Key: "k", Count: 10}); err != nil || !st.OK {
				t.Fatalf("take 10 in 1700: %+v, %v", st, err)
			}
			clk.Set(y2250)
			v := value(t, l, "x", "k")
			st, err := l.Limit(ctx, Request{Name: "x", Key: "k", Count: 1})
			if v.Value != 10 || err != nil || !st.OK {
				t.Errorf("550 years later: Value = %v, Limit(1) = %+v, %v; want full (10) and granted", v.Value, st, err)
			}
		})
	}
	t.Run("fresh window start near 1678", func(t *testing.T) {
		at := time.Date(1680, 1, 1, 0, 0, 0, 0, time.UTC)
		clk := ratelimittest.NewClock(at)
		l := open(t, Options{Now: clk.Now, Limits: map[string]Config{"big": fw(10, 100*365*24*time.Hour, time.Time{})}})
		if v := value(t, l, "big", "x"); v.TS.After(at) {
			t.Errorf("fresh fixed window at %v: window start %v is after now", at, v.TS.UTC())
		}
	})
}

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
		clk := newClock()
		const capacity, rate = 10, 10
		l := open(t, Options{Now: clk.Now, Limits: map[string]Config{
			"x": {Kind: Kind(kind), Rate: rate, Period: time.Hour, Capacity: capacity},
		}})
		ctx := context.Background()
		if st, err := l.Limit(ctx, Request{Name: "x", Count: capacity}); err != nil || !st.OK {
			t.Fatalf("drain: %+v, %v", st, err)
		}
		at := time.Unix(sec, nsec)
		clk.Set(at)
		granted := 0
		for ; granted <= capacity; granted++ {
			st, err := l.Limit(ctx, Request{Name: "x"})
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

// The default clock reads the wall clock (through the monotonic clock
// between settings), and takes the wall clock again once its setting is a
// second old.
func TestWallClock(t *testing.T) {
	c := newWallClock()
	for range 1000 {
		before := time.Now().UnixNano()
		got := c.now()
		after := time.Now().UnixNano()
		if got < before-int64(time.Millisecond) || got > after+int64(time.Millisecond) {
			t.Fatalf("wallClock.now() = %d, outside the wall clock's [%d, %d]", got, before, after)
		}
	}
	stale := time.Now().Add(-2 * resetEvery)
	c.base.Store(&clockBase{at: stale, wall: stale.UnixNano() - int64(time.Hour)}) // an hour off: a step
	if got := c.now(); time.Now().UnixNano()-got > int64(time.Millisecond) {
		t.Fatalf("a setting %v old was kept: %d is an hour behind", 2*resetEvery, got)
	}
	if b := c.base.Load(); time.Since(b.at) > resetEvery {
		t.Fatal("the clock was not set again")
	}
}
