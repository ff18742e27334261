package redislimit

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/seed7fbd42b6/ratelimit"
)

func TestSplitJoin(t *testing.T) {
	for _, ns := range []int64{0, 1, 999, 1000, 1001, -1, -999, -1000, -1001, 1_700_000_000_123_456_789,
		maxClockUs*1000 - 1, -maxClockUs * 1000, math.MaxInt64 / 2, math.MinInt64 / 2} {
		us, rem := split(ns)
		if rem < 0 || rem >= 1000 || us*1000+rem != float64(ns) && math.Abs(us) < 1<<43 {
			t.Fatalf("split(%d) = %v, %v", ns, us, rem)
		}
		got, ok := join(us, rem)
		if !ok || got != ns {
			t.Fatalf("join(split(%d)) = %d, %v", ns, got, ok)
		}
	}
	for _, bad := range [][2]float64{{0.5, 0}, {0, 1000}, {0, -1}, {0, 0.5}, {1 << 53, 0}, {math.NaN(), 0}, {math.Inf(1), 0}} {
		if _, ok := join(bad[0], bad[1]); ok {
			t.Fatalf("join(%v) accepted", bad)
		}
	}
}

// TestUnrepresentableLimits: a fixed window under a microsecond, or over
// MaxWindow, is ErrInvalidConfig: at Open and SetLimits for a named limit
// (SetLimits then changes nothing), at use for an inline one (with
// nothing sent to Redis).
func TestUnrepresentableLimits(t *testing.T) {
	client := topologies[0].client(t)
	for _, p := range []time.Duration{999 * time.Nanosecond, MaxWindow + 1} {
		cfg := ratelimit.Config{Kind: ratelimit.FixedWindow, Rate: 1, Period: p}
		_, err := Open(client, ratelimit.Options{Limits: map[string]ratelimit.Config{"w": cfg}}, KeyPrefix(testPrefix(t)))
		if !errors.Is(err, ratelimit.ErrInvalidConfig) {
			t.Fatalf("period %v: Open: %v", p, err)
		}
		good := ratelimit.Config{Kind: ratelimit.FixedWindow, Rate: 1, Period: S}
		l := open(t, client, ratelimit.Options{Limits: map[string]ratelimit.Config{"w": good}})
		if err := l.SetLimits(map[string]ratelimit.Config{"w": cfg}); !errors.Is(err, ratelimit.ErrInvalidConfig) {
			t.Fatalf("period %v: SetLimits: %v", p, err)
		}
		if c, _ := l.Config("w"); c.Period != S {
			t.Fatalf("period %v: after a refused SetLimits, w's period is %v", p, c.Period)
		}
		ctx := context.Background()
		_, err = l.Limit(ctx, ratelimit.Request{Name: "w", Config: &cfg})
		if !errors.Is(err, ratelimit.ErrInvalidConfig) || errors.Is(err, ratelimit.ErrUnavailable) {
			t.Fatalf("period %v: inline: %v", p, err)
		}
		out := l.LimitMany(ctx, []ratelimit.Request{{Name: "w", Config: &cfg}, {Name: "ok", Config: &ratelimit.Config{Kind: ratelimit.FixedWindow, Rate: 1, Period: time.Microsecond}}}, nil)
		if !errors.Is(out[0].Err, ratelimit.ErrInvalidConfig) || out[1].Err != nil || !out[1].OK {
			t.Fatalf("period %v: LimitMany: %+v", p, out)
		}
		if s := l.Stats(); s.Unavailable != 0 {
			t.Fatalf("counted as unavailable: %+v", s)
		}
	}
}

// TestClockOutOfRange: Options.Now outside the years the store represents
// fails closed.
func TestClockOutOfRange(t *testing.T) {
	client := topologies[0].client(t)
	for _, at := range []time.Time{time.Unix(-1, 0), time.Unix(0, maxClockUs*1000), time.Unix(1<<40, 0)} {
		l := open(t, client, ratelimit.Options{Now: func() time.Time { return at }, Limits: map[string]ratelimit.Config{
			"l": {Kind: ratelimit.TokenBucket, Rate: 1, Period: S},
		}})
		st, err := l.Limit(context.Background(), ratelimit.Request{Name: "l", Key: "k"})
		if !errors.Is(err, ratelimit.ErrUnavailable) || st.OK {
			t.Fatalf("at %v: %+v, %v", at, st, err)
		}
	}
}
