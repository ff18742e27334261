package ratelimit_test

// Hostile and unusual input against the public API (from an independent
// review; its helpers start with hi). The first tests pin bugs that review
// found, each against the expectation from SEMANTICS.md or the package
// docs that it names; the rest, and the fuzz targets, pin behaviours it
// checked.
//
// Everything runs on an injected clock, in t.TempDir() for durable mode,
// without sleeping.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed7fbd42b6/ratelimit"
	"github.com/seed7fbd42b6/ratelimit/ratelimittest"
)

var hiT0 = time.Date(2025, time.March, 14, 15, 9, 26, 535897932, time.UTC)

var hiSentinels = []error{
	ratelimit.ErrUnknownLimit, ratelimit.ErrInvalidConfig, ratelimit.ErrInvalidCount,
	ratelimit.ErrInvalidKey, ratelimit.ErrInvalidOptions, ratelimit.ErrClosed,
	ratelimit.ErrUnavailable, context.Canceled, context.DeadlineExceeded,
}

func hiIsSentinel(err error) bool {
	for _, s := range hiSentinels {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

func hiOpen(t testing.TB, clk *ratelimittest.Clock, limits map[string]ratelimit.Config) *ratelimit.Limiter {
	t.Helper()
	l, err := ratelimit.Open(ratelimit.Options{Now: clk.Now, Limits: limits})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func hiValue(t testing.TB, l *ratelimit.Limiter, name, key string) ratelimit.Value {
	t.Helper()
	v, err := l.Value(context.Background(), name, key)
	if err != nil {
		t.Fatalf("Value(%q, %q): %v", name, key, err)
	}
	return v
}

func hiTB(rate float64, period time.Duration) ratelimit.Config {
	return ratelimit.Config{Kind: ratelimit.TokenBucket, Rate: rate, Period: period}
}

func hiFW(rate float64, period time.Duration) ratelimit.Config {
	return ratelimit.Config{Kind: ratelimit.FixedWindow, Rate: rate, Period: period}
}

// ======================================================================
// Bugs the review found (fixed)
// ======================================================================

// LimitAll naming one bucket twice is decided member by member, in order,
// so reserve 1 then take 10 of a 10-token bucket can never succeed (the
// take needs a full bucket after the reservation): ErrInvalidCount, as
// SEMANTICS asks of a request that can never succeed, not a denial whose
// RetryAfter never comes true (it was, before the fix: denied with 6 s,
// again and again). The other order is granted.
func TestLimitAllRepeatsReplayedInOrder(t *testing.T) {
	ctx := context.Background()
	clk := ratelimittest.NewClock(hiT0)
	l := hiOpen(t, clk, map[string]ratelimit.Config{"tb": hiTB(10, time.Minute)})
	reserveFirst := []ratelimit.Request{
		{Name: "tb", Key: "k", Count: 1, Reserve: true},
		{Name: "tb", Key: "k", Count: 10},
	}
	if st, err := l.LimitAll(ctx, reserveFirst...); !errors.Is(err, ratelimit.ErrInvalidCount) {
		t.Fatalf("LimitAll(reserve 1, take 10) on a full capacity-10 bucket = %+v, %v; want ErrInvalidCount", st, err)
	}
	if v := hiValue(t, l, "tb", "k"); v.Value != 10 {
		t.Fatalf("the refused call took tokens: value %v", v.Value)
	}
	takeFirst := []ratelimit.Request{reserveFirst[1], reserveFirst[0]}
	if st, err := l.LimitAll(ctx, takeFirst...); err != nil || !st.OK {
		t.Fatalf("LimitAll(take 10, reserve 1) on a full capacity-10 bucket = %+v, %v; want granted", st, err)
	}
}

// The same for a sharded limit: two requests for all of a 2-shard limit's
// capacity can never both be granted, so ErrInvalidCount, as in the
// unsharded case (TestLimitAllRepeatsThatCannotFit). Before the fix it was
// a denial whose RetryAfter never came true.
func TestLimitAllShardedRepeatsThatCannotFit(t *testing.T) {
	ctx := context.Background()
	clk := ratelimittest.NewClock(hiT0)
	cfg := hiTB(10, time.Minute)
	cfg.Shards = 2
	l := hiOpen(t, clk, map[string]ratelimit.Config{"s2": cfg})
	rs := []ratelimit.Request{{Name: "s2", Key: "k", Count: 10}, {Name: "s2", Key: "k", Count: 10}}
	if st, err := l.LimitAll(ctx, rs...); !errors.Is(err, ratelimit.ErrInvalidCount) {
		t.Fatalf("LimitAll(10, 10) on a 2-shard capacity-10 limit = %+v, %v; want ErrInvalidCount", st, err)
	}
	rs[1].Count = 4 // 14 can't fit either
	if _, err := l.LimitAll(ctx, rs...); !errors.Is(err, ratelimit.ErrInvalidCount) {
		t.Fatalf("LimitAll(10, 4): %v, want ErrInvalidCount", err)
	}
	rs[0].Count = 6 // 10 fits
	if st, err := l.LimitAll(ctx, rs...); err != nil || !st.OK {
		t.Fatalf("LimitAll(6, 4) on a fresh 2-shard capacity-10 limit = %+v, %v; want granted", st, err)
	}
}

// The same bucket named once by Options.Limits and once with an identical
// inline config is one bucket to the repeat check (it compared limit
// objects, so 6 + 6 of a capacity-10 bucket was a denial whose RetryAfter
// never came true); two different configs for one bucket in one call are
// ErrInvalidConfig (the second member was decided under the first's).
func TestLimitAllNamedAndInlineRepeats(t *testing.T) {
	ctx := context.Background()
	clk := ratelimittest.NewClock(hiT0)
	cfg := hiTB(10, time.Minute)
	l := hiOpen(t, clk, map[string]ratelimit.Config{"tb": cfg})
	if _, err := l.LimitAll(ctx, ratelimit.Request{Name: "tb", Key: "a", Count: 6}, ratelimit.Request{Name: "tb", Key: "a", Count: 6}); !errors.Is(err, ratelimit.ErrInvalidCount) {
		t.Fatalf("baseline named+named: %v, want ErrInvalidCount", err)
	}
	same := cfg
	st, err := l.LimitAll(ctx, ratelimit.Request{Name: "tb", Key: "b", Count: 6}, ratelimit.Request{Name: "tb", Key: "b", Count: 6, Config: &same})
	if !errors.Is(err, ratelimit.ErrInvalidCount) {
		t.Errorf("named+identical inline 6+6 on capacity 10 = %+v, %v; want ErrInvalidCount like named+named", st, err)
	}
	other := cfg
	other.Rate = 100
	if st, err := l.LimitAll(ctx, ratelimit.Request{Name: "tb", Key: "c", Count: 1}, ratelimit.Request{Name: "tb", Key: "c", Count: 1, Config: &other}); !errors.Is(err, ratelimit.ErrInvalidConfig) {
		t.Errorf("named + different inline config for one bucket = %+v, %v; want ErrInvalidConfig", st, err)
	}
	if st, err := l.LimitAll(ctx, ratelimit.Request{Name: "tb", Key: "c", Count: 1}, ratelimit.Request{Name: "tb", Key: "d", Count: 1, Config: &other}); err != nil || !st.OK {
		t.Errorf("named and different inline config for two keys = %+v, %v; want granted", st, err)
	}
}

// Config.MaxReserved is split over shards (MaxReserved / Shards). A
// subnormal MaxReserved divided to 0, which per shard means "unlimited", so
// a limit with a (tiny) debt bound accepted reservations of any size. The
// config is now ErrInvalidConfig, as the same underflow of Capacity or Rate
// already was.
func TestSubnormalMaxReservedPerShard(t *testing.T) {
	clk := ratelimittest.NewClock(hiT0)
	cfg := hiTB(10, time.Minute)
	cfg.MaxReserved = 5e-324 // the smallest positive float64: valid ("finite, >= 0")
	cfg.Shards = 2
	if _, err := ratelimit.Open(ratelimit.Options{Now: clk.Now, Limits: map[string]ratelimit.Config{"sub": cfg}}); !errors.Is(err, ratelimit.ErrInvalidConfig) {
		t.Fatalf("maxReserved 5e-324 over 2 shards: Open = %v, want ErrInvalidConfig", err)
	}
	cfg.Shards = 1 // unsplit it stays a (tiny) bound
	l := hiOpen(t, clk, map[string]ratelimit.Config{"sub": cfg})
	if _, err := l.Limit(context.Background(), ratelimit.Request{Name: "sub", Key: "k", Count: 1000, Reserve: true}); !errors.Is(err, ratelimit.ErrInvalidCount) {
		t.Fatalf("reserve 1000 with capacity 10, maxReserved 5e-324: %v, want ErrInvalidCount", err)
	}
}

// The inline-config cache key mapped every out-of-range Start to the key of
// a Start at the Unix epoch: once a config with Start 1970-01-01 had been
// used, the same config with Start in 1500 or 2500 (ErrInvalidConfig on
// its own, and at Open) was accepted and decided under the epoch phase.
func TestInlineStartOutOfRangeNotCached(t *testing.T) {
	ctx := context.Background()
	clk := ratelimittest.NewClock(hiT0)
	l := hiOpen(t, clk, nil)
	good := hiFW(1, time.Minute)
	good.Start = time.Unix(0, 0)
	bad := good
	bad.Start = time.Date(2500, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := l.Check(ctx, ratelimit.Request{Name: "w", Config: &bad}); !errors.Is(err, ratelimit.ErrInvalidConfig) {
		t.Fatalf("baseline: Start 2500 inline: %v, want ErrInvalidConfig", err)
	}
	if _, err := l.Limit(ctx, ratelimit.Request{Name: "w", Config: &good}); err != nil {
		t.Fatalf("Start 1970 inline: %v", err)
	}
	for _, y := range []int{1500, 2500} {
		bad.Start = time.Date(y, 1, 1, 0, 0, 0, 0, time.UTC)
		st, err := l.Limit(ctx, ratelimit.Request{Name: "w", Key: "x", Config: &bad})
		if !errors.Is(err, ratelimit.ErrInvalidConfig) {
			t.Errorf("Start %d inline after a Start-1970 config was used: %+v, %v; want ErrInvalidConfig", y, st, err)
		}
	}
}

// Value.TS was max(0, shard ts...), so for any clock before 1970 (a valid
// clock: the package accepts Starts back to 1678) Value reported
// 1970-01-01 instead of now (token bucket) or the window start (fixed
// window).
func TestValueTSBefore1970(t *testing.T) {
	clk := ratelimittest.NewClock(time.Unix(-1000, 0))
	fw := hiFW(1, time.Minute)
	fw.Start = time.Unix(-30, 0)
	l := hiOpen(t, clk, map[string]ratelimit.Config{"tb": hiTB(10, time.Minute), "fw": fw})
	if v := hiValue(t, l, "tb", "k"); !v.TS.Equal(time.Unix(-1000, 0)) {
		t.Errorf("token bucket Value.TS at now=-1000s: %v (%d), want now", v.TS.UTC(), v.TS.Unix())
	}
	if v := hiValue(t, l, "fw", "k"); !v.TS.Equal(time.Unix(-1050, 0)) {
		t.Errorf("fixed window Value.TS at now=-1000s, windows at -30s + n*60s: %v (%d), want -1050s", v.TS.UTC(), v.TS.Unix())
	}
}

// A reservation with a large but finite, accepted count (maxReserved unset
// = unlimited) overflowed the debt to -Inf; at the next refill -Inf + Inf
// made the bucket NaN for good (every later request denied, Credit unable
// to repair it, and the state written to the log). A grant whose debt
// would leave float64's range is now denied, and the bucket repays.
func TestDebtBeyondFloat64Refused(t *testing.T) {
	ctx := context.Background()
	clk := ratelimittest.NewClock(hiT0)
	path := filepath.Join(t.TempDir(), "rl.db")
	limits := map[string]ratelimit.Config{"hot": hiTB(1e308, 1)} // 1e308 tokens per ns, capacity 1e308
	l, err := ratelimit.Open(ratelimit.Options{Path: path, Now: clk.Now, Limits: limits})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		st, err := l.Limit(ctx, ratelimit.Request{Name: "hot", Key: "k", Count: 1.7e308, Reserve: true})
		if err != nil {
			if errors.Is(err, ratelimit.ErrInvalidCount) {
				l.Close()
				return // refusing it would be fine
			}
			t.Fatal(err)
		}
		t.Logf("reserve 1.7e308 #%d: %+v", i+1, st)
	}
	clk.Advance(time.Hour) // far beyond any repayment time
	_ = l.Credit(ctx, "hot", "k", 1)
	v := hiValue(t, l, "hot", "k")
	st, err := l.Limit(ctx, ratelimit.Request{Name: "hot", Key: "k", Count: 1})
	if math.IsNaN(v.Value) || math.IsInf(v.Value, 0) || err != nil || !st.OK {
		t.Errorf("an hour later (debt repaid in ns): Value = %v, Limit(1) = %+v, %v; want a finite value and a grant", v.Value, st, err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = ratelimit.Open(ratelimit.Options{Path: path, Now: clk.Now, Limits: limits})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if v := hiValue(t, l, "hot", "k"); math.IsNaN(v.Value) {
		t.Errorf("after reopening, Value = NaN: the poisoned state was made durable")
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
	for _, cfg := range []ratelimit.Config{hiTB(10, time.Minute), hiFW(10, time.Minute)} {
		t.Run(cfg.Kind.String(), func(t *testing.T) {
			clk := ratelimittest.NewClock(y1700)
			l := hiOpen(t, clk, map[string]ratelimit.Config{"x": cfg})
			if st, err := l.Limit(ctx, ratelimit.Request{Name: "x", Key: "k", Count: 10}); err != nil || !st.OK {
				t.Fatalf("take 10 in 1700: %+v, %v", st, err)
			}
			clk.Set(y2250)
			v := hiValue(t, l, "x", "k")
			st, err := l.Limit(ctx, ratelimit.Request{Name: "x", Key: "k", Count: 1})
			if v.Value != 10 || err != nil || !st.OK {
				t.Errorf("550 years later: Value = %v, Limit(1) = %+v, %v; want full (10) and granted", v.Value, st, err)
			}
		})
	}
	t.Run("fresh window start near 1678", func(t *testing.T) {
		at := time.Date(1680, 1, 1, 0, 0, 0, 0, time.UTC)
		clk := ratelimittest.NewClock(at)
		l := hiOpen(t, clk, map[string]ratelimit.Config{"big": hiFW(10, 100*365*24*time.Hour)})
		if v := hiValue(t, l, "big", "x"); v.TS.After(at) {
			t.Errorf("fresh fixed window at %v: window start %v is after now", at, v.TS.UTC())
		}
	})
}

// Reset, Value, Credit and Config on an inline-only name use the latest
// inline config seen for it, which was updated only when a config was
// first cached: after configs A (4 shards), B (1 shard), A again, the name
// resolved to B, and Reset deleted only shard 0 of A's buckets.
func TestInlineNameFollowsLatestConfig(t *testing.T) {
	ctx := context.Background()
	clk := ratelimittest.NewClock(hiT0)
	l := hiOpen(t, clk, nil)
	a := hiTB(40, time.Minute)
	a.Shards = 4
	b := hiTB(10, time.Minute)
	_, _ = l.Limit(ctx, ratelimit.Request{Name: "x", Key: "k", Count: 1, Config: &a})
	_, _ = l.Limit(ctx, ratelimit.Request{Name: "x", Key: "other", Count: 1, Config: &b})
	for i := 0; i < 4; i++ { // drain A's buckets for k (2 shards at a time)
		_, _ = l.Limit(ctx, ratelimit.Request{Name: "x", Key: "k", Count: 20, Config: &a, Reserve: true})
	}
	if c, _ := l.Config("x"); c.Shards != 4 {
		t.Errorf("Config(x) after the latest request used A (4 shards): Shards = %d", c.Shards)
	}
	if err := l.Reset(ctx, "x", "k"); err != nil {
		t.Fatal(err)
	}
	if st, err := l.Check(ctx, ratelimit.Request{Name: "x", Key: "k", Count: 20, Config: &a}); err != nil || !st.OK {
		t.Errorf("after Reset(x, k), Check(20) with A = %+v, %v; want granted (the bucket is full again)", st, err)
	}
}

// A fixed window's RetryAfter could be a whole window late (never early):
// {fixed window, rate 0.3/min, capacity 1}: take 0.3 (0.7 left), ask 1 ->
// RetryAfter was 1m59.999999996s, but the request is granted at 1 min
// (0.7 + 0.3 == 1 in float64, while 1 - 0.7 = 0.30000000000000004 made the
// estimate 2 windows). Status promises the earliest wait: now 1 min.
func TestFixedWindowRetryAfterNotAWindowLate(t *testing.T) {
	ctx := context.Background()
	clk := ratelimittest.NewClock(hiT0)
	cfg := ratelimit.Config{Kind: ratelimit.FixedWindow, Rate: 0.3, Period: time.Minute, Capacity: 1, Start: hiT0}
	l := hiOpen(t, clk, map[string]ratelimit.Config{"w": cfg})
	if st, err := l.Limit(ctx, ratelimit.Request{Name: "w", Count: 0.3}); err != nil || !st.OK {
		t.Fatal(st, err)
	}
	r := ratelimit.Request{Name: "w", Count: 1}
	st, err := l.Limit(ctx, r)
	if err != nil || st.OK {
		t.Fatal(st, err)
	}
	if st.RetryAfter != time.Minute {
		t.Errorf("denied with RetryAfter %v, want %v (the next window)", st.RetryAfter, time.Minute)
	}
	clk.Set(hiT0.Add(time.Minute))
	if again, err := l.Check(ctx, r); err != nil || !again.OK {
		t.Errorf("after %v: %+v, %v; want granted", time.Minute, again, err)
	}
}

// ======================================================================
// Checked and fine
// ======================================================================

// Every bad input of every method is a documented sentinel and changes
// nothing; mixtures in LimitAll take nothing, in LimitMany each is decided
// alone.
func TestHostileBadInputIsSentinelAndLosesNothing(t *testing.T) {
	ctx := context.Background()
	nan, inf := math.NaN(), math.Inf(1)
	longKey := strings.Repeat("k", ratelimit.MaxKeyLen+1)
	longName := strings.Repeat("n", ratelimit.MaxKeyLen+1)
	sh := hiTB(40, time.Minute)
	sh.Shards = 4
	limits := map[string]ratelimit.Config{"tb": hiTB(10, time.Minute), "fw": hiFW(10, time.Minute), "sh": sh,
		"res": {Kind: ratelimit.TokenBucket, Rate: 10, Period: time.Minute, MaxReserved: 5}}
	cfgp := func(c ratelimit.Config) *ratelimit.Config { return &c }
	subCap := hiTB(1, time.Second)
	subCap.Capacity, subCap.Shards = 5e-324, 2
	cases := []struct {
		name string
		r    ratelimit.Request
		want error
	}{
		{"NaN", ratelimit.Request{Name: "tb", Key: "k", Count: nan}, ratelimit.ErrInvalidCount},
		{"-NaN reserve", ratelimit.Request{Name: "res", Key: "k", Count: -nan, Reserve: true}, ratelimit.ErrInvalidCount},
		{"+Inf", ratelimit.Request{Name: "fw", Key: "k", Count: inf}, ratelimit.ErrInvalidCount},
		{"+Inf reserve unlimited", ratelimit.Request{Name: "tb", Key: "k", Count: inf, Reserve: true}, ratelimit.ErrInvalidCount},
		{"-Inf", ratelimit.Request{Name: "tb", Key: "k", Count: -inf}, ratelimit.ErrInvalidCount},
		{"negative subnormal", ratelimit.Request{Name: "tb", Key: "k", Count: -5e-324}, ratelimit.ErrInvalidCount},
		{"MaxFloat64", ratelimit.Request{Name: "tb", Key: "k", Count: math.MaxFloat64}, ratelimit.ErrInvalidCount},
		{"just above capacity", ratelimit.Request{Name: "tb", Key: "k", Count: math.Nextafter(10, 11)}, ratelimit.ErrInvalidCount},
		{"above cap+maxReserved", ratelimit.Request{Name: "res", Key: "k", Count: math.Nextafter(15, 16), Reserve: true}, ratelimit.ErrInvalidCount},
		{"above two shards", ratelimit.Request{Name: "sh", Key: "k", Count: 20.5}, ratelimit.ErrInvalidCount},
		{"unknown", ratelimit.Request{Name: "nope", Key: "k"}, ratelimit.ErrUnknownLimit},
		{"unknown NUL", ratelimit.Request{Name: "tb\x00", Key: "k"}, ratelimit.ErrUnknownLimit},
		{"unknown long name", ratelimit.Request{Name: longName, Key: "k"}, ratelimit.ErrUnknownLimit},
		{"long key", ratelimit.Request{Name: "tb", Key: longKey}, ratelimit.ErrInvalidKey},
		{"long inline name", ratelimit.Request{Name: longName, Key: "k", Config: cfgp(hiTB(1, time.Second))}, ratelimit.ErrInvalidConfig},
		{"inline zero", ratelimit.Request{Name: "i", Key: "k", Config: &ratelimit.Config{}}, ratelimit.ErrInvalidConfig},
		{"inline subnormal capacity sharded", ratelimit.Request{Name: "i", Key: "k", Config: &subCap}, ratelimit.ErrInvalidConfig},
		{"inline too many shards", ratelimit.Request{Name: "i", Key: "k", Config: &ratelimit.Config{Kind: ratelimit.TokenBucket, Rate: 1, Period: 1, Shards: ratelimit.MaxShards + 1}}, ratelimit.ErrInvalidConfig},
		{"inline NaN capacity", ratelimit.Request{Name: "i", Key: "k", Config: &ratelimit.Config{Kind: ratelimit.TokenBucket, Rate: 1, Period: 1, Capacity: nan}}, ratelimit.ErrInvalidConfig},
		{"inline conflict: same name, capacity 2, count 3", ratelimit.Request{Name: "tb", Key: "k", Count: 3, Config: cfgp(hiTB(2, time.Minute))}, ratelimit.ErrInvalidCount},
	}
	clk := ratelimittest.NewClock(hiT0)
	l := hiOpen(t, clk, limits)
	for _, n := range []string{"tb", "fw", "sh", "res"} {
		if _, err := l.Limit(ctx, ratelimit.Request{Name: n, Key: "k", Count: 3}); err != nil {
			t.Fatal(err)
		}
	}
	snap := func() map[string]float64 {
		m := map[string]float64{}
		for _, n := range []string{"tb", "fw", "sh", "res"} {
			for _, k := range []string{"k", "j"} {
				m[n+"/"+k] = hiValue(t, l, n, k).Value
			}
		}
		return m
	}
	before := snap()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := l.Limit(ctx, c.r); !errors.Is(err, c.want) {
				t.Errorf("Limit: %v, want %v", err, c.want)
			}
			if _, err := l.Check(ctx, c.r); !errors.Is(err, c.want) {
				t.Errorf("Check: %v, want %v", err, c.want)
			}
			good := ratelimit.Request{Name: "tb", Key: "j", Count: 1}
			for pos := 0; pos < 2; pos++ {
				rs := []ratelimit.Request{good, c.r}
				if pos == 1 {
					rs = []ratelimit.Request{c.r, good}
				}
				if _, err := l.LimitAll(ctx, rs...); !errors.Is(err, c.want) {
					t.Errorf("LimitAll pos %d: %v, want %v", pos, err, c.want)
				}
			}
			ds := l.LimitMany(ctx, []ratelimit.Request{c.r, {Name: "tb", Key: "j", Count: 1}, c.r}, nil)
			if len(ds) != 3 || !errors.Is(ds[0].Err, c.want) || !errors.Is(ds[2].Err, c.want) || ds[1].Err != nil || !ds[1].OK {
				t.Errorf("LimitMany = %+v", ds)
			}
			// give back the one token LimitMany took
			if err := l.Credit(ctx, "tb", "j", 1); err != nil {
				t.Fatal(err)
			}
		})
	}
	for _, bad := range []float64{nan, inf, -inf, -1, -5e-324} {
		if err := l.Credit(ctx, "tb", "k", bad); !errors.Is(err, ratelimit.ErrInvalidCount) {
			t.Errorf("Credit(%v): %v", bad, err)
		}
	}
	if err := l.Credit(ctx, "nope", "k", 1); !errors.Is(err, ratelimit.ErrUnknownLimit) {
		t.Errorf("Credit unknown: %v", err)
	}
	if err := l.Credit(ctx, "tb", longKey, 1); !errors.Is(err, ratelimit.ErrInvalidKey) {
		t.Errorf("Credit long key: %v", err)
	}
	if err := l.Reset(ctx, "nope", "k"); !errors.Is(err, ratelimit.ErrUnknownLimit) {
		t.Errorf("Reset unknown: %v", err)
	}
	if _, ok := l.Config("nope"); ok {
		t.Errorf("Config(nope) ok")
	}
	after := snap()
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s: value %v -> %v after rejected requests", k, v, after[k])
		}
	}
}

// Options and configs at their edges: accepted or refused as documented.
func TestHostileConfigEdges(t *testing.T) {
	ctx := context.Background()
	clk := ratelimittest.NewClock(hiT0)
	okCfgs := map[string]ratelimit.Config{
		"subnormal rate":                         hiTB(5e-324, time.Hour),
		"max rate":                               hiTB(math.MaxFloat64, 1),
		"max capacity":                           {Kind: ratelimit.TokenBucket, Rate: 1, Period: 1, Capacity: math.MaxFloat64},
		"max period tb":                          hiTB(1, math.MaxInt64),
		"max period fw":                          hiFW(1, math.MaxInt64),
		"1ns fw":                                 hiFW(1, 1),
		"max shards":                             {Kind: ratelimit.TokenBucket, Rate: 65536, Period: time.Second, Shards: ratelimit.MaxShards},
		"neg zero capacity":                      {Kind: ratelimit.TokenBucket, Rate: 3, Period: 1, Capacity: math.Copysign(0, -1)},
		"neg zero maxReserved":                   {Kind: ratelimit.TokenBucket, Rate: 3, Period: 1, MaxReserved: math.Copysign(0, -1)},
		"":                                       hiTB(1, time.Second), // empty name
		"n\x00\xff":                              hiTB(1, time.Second), // NUL and invalid UTF-8
		strings.Repeat("n", ratelimit.MaxKeyLen): hiTB(1, time.Second),
	}
	l := hiOpen(t, clk, okCfgs)
	for name, cfg := range okCfgs {
		r := ratelimit.Request{Name: name, Key: "k", Count: math.Min(1, cfg.Rate)}
		if st, err := l.Limit(ctx, r); err != nil || !st.OK || st.RetryAfter < 0 || st.ResetAfter < 0 {
			t.Errorf("%q: first request = %+v, %v", name, st, err)
		}
		if _, err := l.Value(ctx, name, "k"); err != nil {
			t.Errorf("%q: Value: %v", name, err)
		}
		if err := l.Reset(ctx, name, "k"); err != nil {
			t.Errorf("%q: Reset: %v", name, err)
		}
	}
	if c, _ := l.Config("neg zero capacity"); c.Capacity != 3 {
		t.Errorf("-0 capacity defaulted to %v, want rate 3", c.Capacity)
	}
	// -0 count means 1, like 0
	if st, _ := l.Limit(ctx, ratelimit.Request{Name: "", Key: "z", Count: math.Copysign(0, -1)}); !st.OK || hiValue(t, l, "", "z").Value != 0 {
		t.Errorf("count -0 should take 1: %+v", st)
	}
	// a subnormal count is valid and takes (almost) nothing
	if st, err := l.Limit(ctx, ratelimit.Request{Name: "", Key: "s", Count: 5e-324}); err != nil || !st.OK {
		t.Errorf("subnormal count: %+v, %v", st, err)
	}
	for _, o := range []ratelimit.Options{{Partitions: -1}, {Partitions: ratelimit.MaxPartitions + 1}} {
		if _, err := ratelimit.Open(o); !errors.Is(err, ratelimit.ErrInvalidOptions) {
			t.Errorf("Open(%+v): %v", o, err)
		}
	}
	for _, c := range []ratelimit.Config{
		{Kind: ratelimit.TokenBucket, Rate: 1, Period: 1, Shards: ratelimit.MaxShards + 1},
		{Kind: ratelimit.TokenBucket, Rate: 5e-324, Period: 1, Shards: 2}, // per-shard rate underflows
		{Kind: ratelimit.TokenBucket, Rate: 1, Period: math.MinInt64},
	} {
		if _, err := ratelimit.Open(ratelimit.Options{Limits: map[string]ratelimit.Config{"x": c}}); !errors.Is(err, ratelimit.ErrInvalidConfig) {
			t.Errorf("Open(%+v): %v", c, err)
		}
	}
	// one Partition, and partitions = MaxPartitions, both work
	for _, p := range []int{1, ratelimit.MaxPartitions} {
		l2, err := ratelimit.Open(ratelimit.Options{Partitions: p, Now: clk.Now, Limits: map[string]ratelimit.Config{"a": hiTB(2, time.Second)}})
		if err != nil {
			t.Fatal(err)
		}
		ds := l2.LimitMany(ctx, []ratelimit.Request{{Name: "a", Key: "x"}, {Name: "a", Key: "y"}, {Name: "a", Key: "x"}, {Name: "a", Key: "x"}}, nil)
		if !ds[0].OK || !ds[1].OK || !ds[2].OK || ds[3].OK {
			t.Errorf("partitions %d: %+v", p, ds)
		}
		l2.Close()
	}
}

// Never-used keys: Check, Value, Reset, Credit treat them as full and write
// nothing; LimitAll/LimitMany with nothing to do.
func TestHostileNeverUsedKeysAndEmptyCalls(t *testing.T) {
	ctx := context.Background()
	clk := ratelimittest.NewClock(hiT0)
	sh := hiTB(40, time.Minute)
	sh.Shards = 4
	l := hiOpen(t, clk, map[string]ratelimit.Config{"tb": hiTB(10, time.Minute), "fw": hiFW(10, time.Minute), "sh": sh})
	for _, n := range []string{"tb", "fw", "sh"} {
		full := 10.0
		if n == "sh" {
			full = 40
		}
		for _, k := range []string{"", "\x00", "\xff\xfe", strings.Repeat("x", ratelimit.MaxKeyLen)} {
			if st, err := l.Check(ctx, ratelimit.Request{Name: n, Key: k, Count: 1}); err != nil || !st.OK {
				t.Errorf("Check fresh %s: %+v %v", n, st, err)
			}
			if err := l.Reset(ctx, n, k); err != nil {
				t.Errorf("Reset fresh: %v", err)
			}
			if err := l.Credit(ctx, n, k, 5); err != nil {
				t.Errorf("Credit fresh: %v", err)
			}
			if err := l.Credit(ctx, n, k, 0); err != nil {
				t.Errorf("Credit 0: %v", err)
			}
			if v := hiValue(t, l, n, k); v.Value != full {
				t.Errorf("%s fresh value %v, want %v", n, v.Value, full)
			}
		}
	}
	if st := l.Stats(); st.LiveBuckets != 0 {
		t.Errorf("reads, resets and credits of fresh keys left %d live buckets", st.LiveBuckets)
	}
	if st, err := l.LimitAll(ctx); err != nil || !st.OK {
		t.Errorf("LimitAll() = %+v, %v", st, err)
	}
	if st, err := l.LimitAll(ctx, []ratelimit.Request{}...); err != nil || !st.OK {
		t.Errorf("LimitAll(empty) = %+v, %v", st, err)
	}
	if ds := l.LimitMany(ctx, nil, nil); len(ds) != 0 {
		t.Errorf("LimitMany(nil) = %+v", ds)
	}
	buf := make([]ratelimit.Decision, 5)
	if ds := l.LimitMany(ctx, []ratelimit.Request{}, buf); len(ds) != 0 {
		t.Errorf("LimitMany(empty, buf) = %+v", ds)
	}
	// only invalid, and only sharded, batches
	ds := l.LimitMany(ctx, []ratelimit.Request{{Name: "x"}, {Name: "tb", Count: -1}}, nil)
	if len(ds) != 2 || !errors.Is(ds[0].Err, ratelimit.ErrUnknownLimit) || !errors.Is(ds[1].Err, ratelimit.ErrInvalidCount) {
		t.Errorf("LimitMany(all invalid) = %+v", ds)
	}
	ds = l.LimitMany(ctx, []ratelimit.Request{{Name: "sh", Key: "m", Count: 20}, {Name: "sh", Key: "m", Count: 20}, {Name: "sh", Key: "m", Count: 0.5}}, nil)
	for i, d := range ds {
		if d.Err != nil {
			t.Errorf("LimitMany sharded %d: %v", i, d.Err)
		}
	}
	granted := 0.0
	for i, c := range []float64{20, 20, 0.5} {
		if ds[i].OK {
			granted += c
		}
	}
	if v := hiValue(t, l, "sh", "m").Value; v != 40-granted {
		t.Errorf("sharded LimitMany: value %v, granted %v", v, granted)
	}
}

// A LimitAll with valid and denied members takes nothing; repeated members
// on one bucket that fit are granted and counted once each.
func TestHostileLimitAllAllOrNothing(t *testing.T) {
	ctx := context.Background()
	clk := ratelimittest.NewClock(hiT0)
	sh := hiTB(40, time.Minute)
	sh.Shards = 4
	l := hiOpen(t, clk, map[string]ratelimit.Config{"a": hiTB(10, time.Minute), "b": hiFW(3, time.Minute), "sh": sh})
	st, err := l.LimitAll(ctx,
		ratelimit.Request{Name: "a", Key: "k", Count: 2}, ratelimit.Request{Name: "a", Key: "k", Count: 3},
		ratelimit.Request{Name: "sh", Key: "k", Count: 10}, ratelimit.Request{Name: "b", Key: "k", Count: 3})
	if err != nil || !st.OK {
		t.Fatalf("fitting call: %+v %v", st, err)
	}
	if v := hiValue(t, l, "a", "k").Value; v != 5 {
		t.Errorf("a = %v, want 5", v)
	}
	st, err = l.LimitAll(ctx,
		ratelimit.Request{Name: "a", Key: "k", Count: 2}, ratelimit.Request{Name: "sh", Key: "k", Count: 10},
		ratelimit.Request{Name: "b", Key: "k", Count: 1})
	if err != nil || st.OK || st.Limit != "b" || st.RetryAfter <= 0 {
		t.Fatalf("denied call: %+v %v", st, err)
	}
	for n, want := range map[string]float64{"a": 5, "sh": 30, "b": 0} {
		if v := hiValue(t, l, n, "k").Value; v != want {
			t.Errorf("%s = %v after a denied LimitAll, want %v", n, v, want)
		}
	}
	// take then reserve on one bucket (the documented-working order)
	if st, err := l.LimitAll(ctx, ratelimit.Request{Name: "a", Key: "r", Count: 10}, ratelimit.Request{Name: "a", Key: "r", Count: 1, Reserve: true}); err != nil || !st.OK || st.RetryAfter != 6*time.Second {
		t.Errorf("take 10 then reserve 1: %+v, %v", st, err)
	}
}

// Canceled and expired contexts: Credit, Snapshot-free methods fail with the
// context's error and consume nothing (the acceptance tests cover the rest).
func TestHostileCanceledContextCredit(t *testing.T) {
	clk := ratelimittest.NewClock(hiT0)
	sh := hiTB(40, time.Minute)
	sh.Shards = 4
	l := hiOpen(t, clk, map[string]ratelimit.Config{"a": hiTB(10, time.Minute), "sh": sh})
	ctx := context.Background()
	_, _ = l.Limit(ctx, ratelimit.Request{Name: "a", Key: "k", Count: 10})
	_, _ = l.Limit(ctx, ratelimit.Request{Name: "sh", Key: "k", Count: 20})
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	for _, n := range []string{"a", "sh"} {
		if err := l.Credit(canceled, n, "k", 5); !errors.Is(err, context.Canceled) {
			t.Errorf("Credit(%s) canceled: %v", n, err)
		}
	}
	if v := hiValue(t, l, "a", "k").Value; v != 0 {
		t.Errorf("a = %v", v)
	}
	if v := hiValue(t, l, "sh", "k").Value; v != 20 {
		t.Errorf("sh = %v", v)
	}
}

// Every method concurrently with Close: no panic, no hang, only nil or
// ErrClosed; after Close everything is ErrClosed (Stats still works).
func TestHostileEverythingConcurrentWithClose(t *testing.T) {
	for round := 0; round < 20; round++ {
		clk := ratelimittest.NewClock(hiT0)
		sh := hiTB(1e6, time.Minute)
		sh.Shards = 4
		dir := ""
		if round%2 == 1 {
			dir = filepath.Join(t.TempDir(), "rl.db")
		}
		l, err := ratelimit.Open(ratelimit.Options{Path: dir, Now: clk.Now, Limits: map[string]ratelimit.Config{"a": hiTB(1e6, time.Minute), "sh": sh}})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		inline := hiFW(1e6, time.Minute)
		var wg sync.WaitGroup
		errc := make(chan error, 1000)
		start := make(chan struct{})
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				<-start
				for i := 0; i < 200; i++ {
					var err error
					key := fmt.Sprint(i % 7)
					switch (g + i) % 9 {
					case 0:
						_, err = l.Limit(ctx, ratelimit.Request{Name: "a", Key: key})
					case 1:
						_, err = l.Check(ctx, ratelimit.Request{Name: "sh", Key: key})
					case 2:
						err = l.Reset(ctx, "sh", key)
					case 3:
						_, err = l.Value(ctx, "sh", key)
					case 4:
						err = l.Credit(ctx, "sh", key, 3)
					case 5:
						_, err = l.LimitAll(ctx, ratelimit.Request{Name: "a", Key: key}, ratelimit.Request{Name: "sh", Key: key}, ratelimit.Request{Name: "i", Key: key, Config: &inline})
					case 6:
						ds := l.LimitMany(ctx, []ratelimit.Request{{Name: "sh", Key: key}, {Name: "a", Key: key}}, nil)
						err = errors.Join(ds[0].Err, ds[1].Err)
					case 7:
						err = l.Snapshot()
					default:
						_ = l.Stats()
						err = l.Credit(ctx, "a", key, 1)
					}
					if err != nil && !errors.Is(err, ratelimit.ErrClosed) {
						select {
						case errc <- err:
						default:
						}
					}
				}
			}(g)
		}
		close(start)
		if err := l.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		wg.Wait()
		close(errc)
		for err := range errc {
			t.Errorf("round %d: error other than ErrClosed: %v", round, err)
		}
		if err := l.Credit(ctx, "a", "k", 1); !errors.Is(err, ratelimit.ErrClosed) {
			t.Errorf("Credit after Close: %v", err)
		}
		if err := l.Snapshot(); !errors.Is(err, ratelimit.ErrClosed) {
			t.Errorf("Snapshot after Close: %v", err)
		}
		_ = l.Stats()
	}
}

// Durable mode: odd names and keys (NUL, invalid UTF-8, empty, maximum
// length) survive a restart exactly; an inline-only limit is unknown to
// Value after a restart (documented) but its recovered state is used as soon
// as a request carries the config again.
func TestHostileDurableOddNamesAndKeys(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "rl.db")
	clk := ratelimittest.NewClock(hiT0)
	maxName := strings.Repeat("N", ratelimit.MaxKeyLen)
	limits := map[string]ratelimit.Config{"": hiTB(100, time.Minute), "n\x00\xff": hiFW(100, time.Minute), maxName: hiTB(100, time.Minute)}
	keys := []string{"", "\x00", "a\x00", "\xff\xfe\x80", "ключ", strings.Repeat("k", ratelimit.MaxKeyLen)}
	inline := hiTB(7, time.Hour)
	l, err := ratelimit.Open(ratelimit.Options{Path: path, Now: clk.Now, Limits: limits})
	if err != nil {
		t.Fatal(err)
	}
	for name := range limits {
		for i, k := range keys {
			if st, err := l.Limit(ctx, ratelimit.Request{Name: name, Key: k, Count: float64(i + 1)}); err != nil || !st.OK {
				t.Fatalf("%q/%q: %+v %v", name, k, st, err)
			}
		}
	}
	if _, err := l.Limit(ctx, ratelimit.Request{Name: "inl", Key: "k", Count: 5, Config: &inline}); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = ratelimit.Open(ratelimit.Options{Path: path, Now: clk.Now, Limits: limits})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for name := range limits {
		for i, k := range keys {
			if v := hiValue(t, l, name, k); v.Value != 100-float64(i+1) {
				t.Errorf("%q/%q after restart: %v, want %v", name, k, v.Value, 100-float64(i+1))
			}
		}
	}
	if _, err := l.Value(ctx, "inl", "k"); !errors.Is(err, ratelimit.ErrUnknownLimit) {
		t.Errorf("inline-only limit after restart: %v, want ErrUnknownLimit (documented)", err)
	}
	if st, err := l.Limit(ctx, ratelimit.Request{Name: "inl", Key: "k", Count: 3, Config: &inline}); err != nil || st.OK {
		t.Errorf("inline limit after restart with 2 left, take 3: %+v, %v; want denied (state recovered)", st, err)
	}
}

// A nil *Limiter panics, like most Go types with a constructor, and so
// does a nil context, as in the standard library. A zero Limiter is closed:
// every method returns ErrClosed (it panicked in Close, on inline requests,
// Value, Stats and Snapshot).
func TestHostileNilAndZeroLimiter(t *testing.T) {
	ctx := context.Background()
	mustPanic := func(name string, f func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s: no panic", name)
			}
		}()
		f()
	}
	var nl *ratelimit.Limiter
	mustPanic("nil.Limit", func() { _, _ = nl.Limit(ctx, ratelimit.Request{Name: "a"}) })
	mustPanic("nil.Close", func() { _ = nl.Close() })
	var zl ratelimit.Limiter
	inline := hiTB(1, time.Second)
	closed := func(name string, err error) {
		t.Helper()
		if !errors.Is(err, ratelimit.ErrClosed) {
			t.Errorf("zero Limiter: %s = %v, want ErrClosed", name, err)
		}
	}
	_, err := zl.Limit(ctx, ratelimit.Request{Name: "a", Config: &inline})
	closed("Limit inline", err)
	_, err = zl.Check(ctx, ratelimit.Request{Name: "a"})
	closed("Check", err)
	_, err = zl.LimitAll(ctx, ratelimit.Request{Name: "a", Config: &inline})
	closed("LimitAll", err)
	ds := zl.LimitMany(ctx, []ratelimit.Request{{Name: "a", Config: &inline}}, nil)
	if len(ds) != 1 {
		t.Fatalf("zero Limiter: LimitMany gave %d decisions for 1 request", len(ds))
	}
	closed("LimitMany", ds[0].Err)
	_, err = zl.Value(ctx, "a", "k")
	closed("Value", err)
	closed("Reset", zl.Reset(ctx, "a", "k"))
	closed("Credit", zl.Credit(ctx, "a", "k", 1))
	closed("Snapshot", zl.Snapshot())
	closed("Close", zl.Close())
	if st := zl.Stats(); st != (ratelimit.Stats{}) {
		t.Errorf("zero Limiter: Stats = %+v, want zero", st)
	}
	if _, ok := zl.Config("a"); ok {
		t.Error("zero Limiter: Config found a limit")
	}
	clk := ratelimittest.NewClock(hiT0)
	l := hiOpen(t, clk, map[string]ratelimit.Config{"a": inline})
	//lint:ignore SA1012 deliberately nil
	mustPanic("nil ctx", func() { _, _ = l.Limit(nil, ratelimit.Request{Name: "a"}) }) //nolint:staticcheck
}

// Clock going backwards far and forwards far (within ±100 years, no
// overflow): nothing minted, nothing lost, ts never moves back.
func TestHostileClockFarJumpsWithinRange(t *testing.T) {
	ctx := context.Background()
	clk := ratelimittest.NewClock(hiT0)
	l := hiOpen(t, clk, map[string]ratelimit.Config{"tb": hiTB(10, time.Minute), "fw": hiFW(10, time.Minute)})
	for _, n := range []string{"tb", "fw"} {
		if st, _ := l.Limit(ctx, ratelimit.Request{Name: n, Key: "k", Count: 10}); !st.OK {
			t.Fatal("denied")
		}
	}
	clk.Set(hiT0.AddDate(-50, 0, 0))
	for _, n := range []string{"tb", "fw"} {
		if st, _ := l.Limit(ctx, ratelimit.Request{Name: n, Key: "k", Count: 1}); st.OK || st.RetryAfter <= 0 {
			t.Errorf("%s 50 years back: %+v, want denied", n, st)
		}
		if v := hiValue(t, l, n, "k"); v.Value != 0 {
			t.Errorf("%s 50 years back: value %v", n, v.Value)
		}
	}
	clk.Set(hiT0.AddDate(100, 0, 0))
	for _, n := range []string{"tb", "fw"} {
		if v := hiValue(t, l, n, "k"); v.Value != 10 {
			t.Errorf("%s 100 years on: value %v, want 10", n, v.Value)
		}
	}
}

// ======================================================================
// Fuzzing: SEMANTICS.md's arithmetic as a model, hostile floats
// ======================================================================

// hiBucket is one bucket of SEMANTICS.md's model.
type hiBucket struct {
	present bool
	value   float64
	ts      int64
}

// hiModel is SEMANTICS.md's arithmetic for one unsharded limit.
type hiModel struct {
	kind     ratelimit.Kind
	rate     float64
	period   int64
	capacity float64
	maxRes   float64
	phase    map[string]int64 // a fresh fixed window's start, mod period, per key
	b        map[string]*hiBucket
}

func hiFloorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func (m *hiModel) project(key string, now int64) (float64, int64) {
	b := m.b[key]
	if m.kind == ratelimit.TokenBucket {
		if !b.present {
			return m.capacity, now
		}
		el, ts := now-b.ts, now
		if el < 0 {
			el, ts = 0, b.ts
		}
		return math.Min(b.value+float64(el)*m.rate/float64(m.period), m.capacity), ts
	}
	if !b.present {
		ph := m.phase[key]
		return m.capacity, ph + hiFloorDiv(now-ph, m.period)*m.period
	}
	k := int64(0)
	if now > b.ts {
		k = (now - b.ts) / m.period
	}
	return math.Min(b.value+m.rate*float64(k), m.capacity), b.ts + k*m.period
}

// store writes a granted or credited state; a full bucket is the same as
// an absent one (SEMANTICS.md), so a write that leaves it full removes it.
func (m *hiModel) store(key string, v float64, ts int64) {
	if v >= m.capacity {
		*m.b[key] = hiBucket{}
		return
	}
	*m.b[key] = hiBucket{present: true, value: v, ts: ts}
}

// countErr is the model's verdict on a count: nil or ErrInvalidCount.
func (m *hiModel) countErr(count float64, reserve bool) (float64, error) {
	if count == 0 {
		count = 1
	}
	if math.IsNaN(count) || math.IsInf(count, 0) || count < 0 {
		return count, ratelimit.ErrInvalidCount
	}
	most := m.capacity
	if reserve {
		if m.maxRes > 0 {
			most += m.maxRes
		} else {
			most = math.Inf(1)
		}
	}
	if count > most {
		return count, ratelimit.ErrInvalidCount
	}
	return count, nil
}

// take returns the decision and the state a grant would store.
func (m *hiModel) take(key string, now int64, count float64, reserve bool) (ok bool, v float64, ts int64) {
	v, ts = m.project(key, now)
	v -= count
	allowed := 0.0
	if reserve {
		allowed = math.Inf(1)
		if m.maxRes > 0 {
			allowed = m.maxRes
		}
	}
	return v >= -allowed, v, ts
}

type hiReader struct{ b []byte }

func (r *hiReader) byte() byte {
	if len(r.b) == 0 {
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *hiReader) u64() uint64 {
	var x uint64
	for i := 0; i < 8; i++ {
		x = x<<8 | uint64(r.byte())
	}
	return x
}

func (r *hiReader) count(m *hiModel) float64 {
	c, rate := m.capacity, m.rate
	specials := []float64{0, math.Copysign(0, -1), 1, 0.5, 2, 3, c, c * 0.7, c / 3, c + 1, math.Nextafter(c, math.Inf(1)),
		c + m.maxRes, math.Nextafter(c+m.maxRes, math.Inf(1)), 1e-300, 5e-324, -1, -5e-324, math.NaN(), math.Inf(1),
		math.Inf(-1), math.MaxFloat64, rate, rate / 3, c * 2, 1e9}
	b := r.byte()
	if b < 224 {
		return specials[int(b)%len(specials)]
	}
	return math.Float64frombits(r.u64())
}

var hiVerbose = false

const (
	hiCentury = int64(100 * 365 * 24 * time.Hour)
	hiMaxWait = time.Duration(1) << 62
)

var (
	hiLo = time.Date(1971, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	hiHi = time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
)

func hiConfigure(kindB uint8, rate float64, period int64, capacity, maxRes float64, startOff int64) (ratelimit.Config, bool) {
	c := ratelimit.Config{Kind: ratelimit.TokenBucket, Rate: rate, Capacity: capacity, MaxReserved: maxRes}
	if kindB&1 == 1 {
		c.Kind = ratelimit.FixedWindow
	}
	if kindB%16 == 15 {
		c.Kind = ratelimit.Kind(int(kindB) - 128)
	}
	if period > 0 {
		period = 1 + (period-1)%hiCentury // keep the clock arithmetic clear of int64 overflow (BUG 8)
	}
	c.Period = time.Duration(period)
	if kindB&2 == 2 {
		c.Shards = 1
	}
	if (c.Kind == ratelimit.FixedWindow && startOff != 0) || kindB&0x80 != 0 {
		c.Start = hiT0.Add(time.Duration(startOff % hiCentury))
	}
	fin := func(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
	valid := (c.Kind == ratelimit.TokenBucket || c.Kind == ratelimit.FixedWindow) && fin(rate) && rate > 0 && period > 0 &&
		fin(capacity) && capacity >= 0 && fin(maxRes) && maxRes >= 0 && !(c.Kind == ratelimit.TokenBucket && !c.Start.IsZero())
	return c, valid
}

// FuzzHostileModel runs a script of Limit, Check, Credit, Reset, Value,
// LimitAll, LimitMany and clock moves (forwards, backwards, decades) on one
// unsharded limit with fuzzed config and counts, and compares every answer
// bit for bit with SEMANTICS.md's arithmetic; denials must write nothing,
// errors must be sentinels that write nothing, RetryAfter must be the
// earliest wait that succeeds (never early), Check must equal Limit.
//
// Kept out of the known-bug regions: reservations whose debt would exceed
// 1e300 (BUG 7), clocks outside 1971..2099 (BUGs 6, 8).
func FuzzHostileModel(f *testing.F) {
	f.Add(uint8(0), 10.0, int64(time.Minute), 0.0, 0.0, int64(0), []byte{0, 6, 1, 7, 1, 5, 4, 0, 2, 2, 9, 1, 0, 17, 5})
	f.Add(uint8(1), 10.0, int64(time.Minute), 0.0, 5.0, int64(1), []byte{0, 6, 17, 3, 6, 0, 1, 7, 0, 11, 5, 12, 3, 2, 0, 3})
	f.Add(uint8(3), 2.5, int64(3*time.Second), 7.0, 1.0, int64(12345), []byte{5, 1, 2, 3, 4, 6, 7, 8, 9, 10, 11, 12, 13, 14})
	f.Add(uint8(2), 1e-9, int64(time.Hour), 0.0, 0.0, int64(0), []byte{0, 14, 0, 14, 1, 14, 8, 1, 3})
	f.Add(uint8(0), 1e308, int64(1), 0.0, 0.0, int64(0), []byte{0, 19, 8, 200, 0, 20, 7, 2, 0})
	f.Add(uint8(5), 0.3, int64(1100*time.Millisecond), 1e6, 1e6, int64(-777), []byte{0, 8, 9, 1, 8, 0, 12, 11, 200, 3})
	f.Add(uint8(15), math.NaN(), int64(-1), -1.0, math.Inf(1), int64(0), []byte{0})
	f.Add(uint8(128), 1.0, int64(time.Second), 0.0, 0.0, int64(5), []byte{0})
	f.Fuzz(func(t *testing.T, kindB uint8, rate float64, period int64, capacity, maxRes float64, startOff int64, ops []byte) {
		ctx := context.Background()
		cfg, valid := hiConfigure(kindB, rate, period, capacity, maxRes, startOff)
		clk := ratelimittest.NewClock(hiT0)
		l, err := ratelimit.Open(ratelimit.Options{Now: clk.Now, Limits: map[string]ratelimit.Config{"x": cfg}, SweepInterval: -1, Partitions: 2})
		if !valid {
			if !errors.Is(err, ratelimit.ErrInvalidConfig) {
				if err == nil {
					l.Close()
				}
				t.Fatalf("Open(%+v) = %v, want ErrInvalidConfig", cfg, err)
			}
			l := hiOpen(t, clk, nil)
			if _, err := l.Limit(ctx, ratelimit.Request{Name: "x", Config: &cfg}); !errors.Is(err, ratelimit.ErrInvalidConfig) {
				t.Fatalf("inline %+v: %v, want ErrInvalidConfig", cfg, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("Open(%+v): %v", cfg, err)
		}
		defer l.Close()
		m := &hiModel{kind: cfg.Kind, rate: cfg.Rate, period: int64(cfg.Period), capacity: cfg.Capacity, maxRes: cfg.MaxReserved,
			phase: map[string]int64{}, b: map[string]*hiBucket{}}
		if m.capacity == 0 {
			m.capacity = m.rate
		}
		keys := []string{"a", "b\x00\xff"}
		for _, k := range keys {
			m.b[k] = &hiBucket{}
			v := hiValue(t, l, "x", k)
			if v.Value != m.capacity {
				t.Fatalf("fresh %q: value %v, want %v", k, v.Value, m.capacity)
			}
			if m.kind == ratelimit.FixedWindow {
				ts := v.TS.UnixNano()
				if ts > hiT0.UnixNano() || hiT0.UnixNano()-ts >= m.period {
					t.Fatalf("fresh %q: window start %v does not contain now", k, v.TS)
				}
				if !cfg.Start.IsZero() && (ts-cfg.Start.UnixNano())%m.period != 0 {
					t.Fatalf("fresh %q: window start %v not on the Start grid", k, v.TS)
				}
				m.phase[k] = ts
			}
		}
		now := hiT0.UnixNano()
		setClock := func(n int64) { clk.Set(time.Unix(0, n)) }
		// checkAll compares every key's Value with the model.
		checkAll := func(ctxt string) {
			t.Helper()
			for _, k := range keys {
				v := hiValue(t, l, "x", k)
				wv, wts := m.project(k, now)
				if v.Value != wv && !(math.IsNaN(v.Value) && math.IsNaN(wv)) {
					t.Fatalf("%s: Value(%q) = %v, want %v", ctxt, k, v.Value, wv)
				}
				if v.TS.UnixNano() != wts {
					t.Fatalf("%s: Value(%q).TS = %d, want %d", ctxt, k, v.TS.UnixNano(), wts)
				}
			}
		}
		// inDebtRegion: a grant would leave debt beyond 1e300 (BUG 7).
		inDebtRegion := func(key string, count float64) bool {
			v, _ := m.project(key, now)
			return v-count < -1e300
		}
		// verifyRetry checks that RetryAfter is the earliest wait that
		// succeeds, with Check and Value (neither writes).
		verifyRetry := func(ctxt string, r ratelimit.Request, st ratelimit.Status, wrote bool) {
			t.Helper()
			ra := int64(st.RetryAfter)
			if ra < 0 {
				t.Fatalf("%s: negative RetryAfter %v", ctxt, st.RetryAfter)
			}
			if st.OK && (ra == 0 || !wrote) {
				return // no wait, or a Check's reservation (nothing stored to watch)
			}
			if !st.OK && ra == 0 {
				t.Fatalf("%s: denied with RetryAfter 0", ctxt)
			}
			if st.RetryAfter >= hiMaxWait || now+ra > hiHi {
				return // saturated or beyond the fuzzed clock range
			}
			defer setClock(now)
			ok := func(at int64) bool {
				setClock(at)
				if st.OK { // a reservation: when the debt is repaid
					return hiValue(t, l, "x", r.Key).Value >= 0
				}
				c, err := l.Check(ctx, r)
				if err != nil {
					t.Fatalf("%s: Check at +%d: %v", ctxt, at-now, err)
				}
				return c.OK
			}
			if !ok(now + ra) {
				t.Fatalf("%s: RetryAfter %v is early: not ok then", ctxt, st.RetryAfter)
			}
			// Earliest: exact while float64 resolves single nanoseconds of
			// refill; beyond that the refill moves in steps of many ns
			// (plateaus), so allow lateness of one part in a million.
			slack := max(1, ra/1_000_000)
			if m.kind == ratelimit.FixedWindow {
				slack = m.period + 1 // may be one window late: BUG 10
			}
			if ra >= slack && ok(now+ra-slack) {
				t.Fatalf("%s: RetryAfter %v is late: ok %dns earlier", ctxt, st.RetryAfter, slack)
			}
		}
		rd := &hiReader{b: ops}
		for step := 0; step < 64 && len(rd.b) > 0; step++ {
			op := rd.byte() % 10
			key := keys[int(rd.byte())%2]
			ctxt := fmt.Sprintf("step %d op %d cfg %+v now t0%+v key %q", step, op, cfg, time.Duration(now-hiT0.UnixNano()), key)
			if hiVerbose {
				for _, k := range keys {
					v, ts := m.project(k, now)
					t.Logf("before step %d: model %q = %v @ t0%+d (present %v)", step, k, v, ts-hiT0.UnixNano(), m.b[k].present)
				}
			}
			switch op {
			case 0, 1, 2: // Limit (with Check first) or Check alone
				count := rd.count(m)
				reserve := rd.byte()%3 == 0
				r := ratelimit.Request{Name: "x", Key: key, Count: count, Reserve: reserve}
				ctxt += fmt.Sprintf(" count %v reserve %v", count, reserve)
				n, werr := m.countErr(count, reserve)
				if werr == nil && reserve && inDebtRegion(key, n) {
					continue
				}
				chk, cerr := l.Check(ctx, r)
				if op == 2 {
					if !errors.Is(cerr, werr) || werr == nil && cerr != nil {
						t.Fatalf("%s: Check err %v, want %v", ctxt, cerr, werr)
					}
					if cerr == nil {
						wok, _, _ := m.take(key, now, n, reserve)
						if chk.OK != wok {
							t.Fatalf("%s: Check OK %v, want %v", ctxt, chk.OK, wok)
						}
						verifyRetry(ctxt+" (check)", r, chk, false)
					}
					checkAll(ctxt)
					continue
				}
				st, err := l.Limit(ctx, r)
				if werr != nil {
					if !errors.Is(err, werr) || !errors.Is(cerr, werr) {
						t.Fatalf("%s: Limit err %v, Check err %v, want %v", ctxt, err, cerr, werr)
					}
					checkAll(ctxt)
					continue
				}
				if err != nil || cerr != nil {
					t.Fatalf("%s: Limit err %v, Check err %v", ctxt, err, cerr)
				}
				if st != chk && !(math.IsNaN(st.Remaining) && math.IsNaN(chk.Remaining)) {
					t.Fatalf("%s: Check said %+v, Limit said %+v", ctxt, chk, st)
				}
				wok, wv, wts := m.take(key, now, n, reserve)
				if st.OK != wok {
					t.Fatalf("%s: OK %v, want %v (status %+v)", ctxt, st.OK, wok, st)
				}
				left, _ := m.project(key, now)
				if wok {
					m.store(key, wv, wts)
					left = wv
				}
				if st.Remaining != left {
					t.Fatalf("%s: Remaining %v, want %v", ctxt, st.Remaining, left)
				}
				if st.Limit != "x" || st.ResetAfter < 0 {
					t.Fatalf("%s: status %+v", ctxt, st)
				}
				checkAll(ctxt)
				verifyRetry(ctxt, r, st, true)
			case 3: // Credit
				c := rd.count(m)
				ctxt += fmt.Sprintf(" credit %v", c)
				err := l.Credit(ctx, "x", key, c)
				if math.IsNaN(c) || math.IsInf(c, 0) || c < 0 {
					if !errors.Is(err, ratelimit.ErrInvalidCount) {
						t.Fatalf("%s: %v, want ErrInvalidCount", ctxt, err)
					}
				} else if err != nil {
					t.Fatalf("%s: %v", ctxt, err)
				} else if c != 0 {
					v, ts := m.project(key, now)
					m.store(key, math.Min(v+c, m.capacity), ts)
				}
				checkAll(ctxt)
			case 4: // Reset
				if err := l.Reset(ctx, "x", key); err != nil {
					t.Fatalf("%s: Reset: %v", ctxt, err)
				}
				*m.b[key] = hiBucket{}
				checkAll(ctxt)
			case 5: // LimitAll over both keys (and sometimes an unknown limit)
				c1, c2 := rd.count(m), rd.count(m)
				res := rd.byte()
				r1 := ratelimit.Request{Name: "x", Key: keys[0], Count: c1, Reserve: res&1 != 0}
				r2 := ratelimit.Request{Name: "x", Key: keys[1], Count: c2, Reserve: res&2 != 0}
				rs := []ratelimit.Request{r1, r2}
				if res&4 != 0 {
					rs = []ratelimit.Request{r2, r1}
				}
				if res&8 != 0 {
					rs = append(rs, ratelimit.Request{Name: "nope"})
				}
				ctxt += fmt.Sprintf(" LimitAll %v", rs)
				var werr error
				var ns []float64
				for _, r := range rs {
					if r.Name == "nope" {
						if werr == nil {
							werr = ratelimit.ErrUnknownLimit
						}
						continue
					}
					n, e := m.countErr(r.Count, r.Reserve)
					if e == nil && r.Reserve && inDebtRegion(r.Key, n) {
						werr = errors.New("skip")
					}
					if werr == nil {
						werr = e
					}
					ns = append(ns, n)
				}
				if werr != nil && werr.Error() == "skip" {
					continue
				}
				st, err := l.LimitAll(ctx, rs...)
				if werr != nil {
					if !errors.Is(err, werr) {
						t.Fatalf("%s: err %v, want %v", ctxt, err, werr)
					}
					checkAll(ctxt)
					continue
				}
				if err != nil {
					t.Fatalf("%s: %v", ctxt, err)
				}
				all := true
				type upd struct {
					key string
					v   float64
					ts  int64
				}
				var us []upd
				for i, r := range rs {
					ok, v, ts := m.take(r.Key, now, ns[i], r.Reserve)
					all = all && ok
					us = append(us, upd{r.Key, v, ts})
				}
				if st.OK != all {
					t.Fatalf("%s: OK %v, want %v (%+v)", ctxt, st.OK, all, st)
				}
				if !st.OK && st.RetryAfter <= 0 {
					t.Fatalf("%s: denied with RetryAfter %v", ctxt, st.RetryAfter)
				}
				if all {
					for _, u := range us {
						m.store(u.key, u.v, u.ts)
					}
				}
				checkAll(ctxt)
			case 6: // LimitMany: up to 4 requests, each decided alone, in order
				nreq := 1 + int(rd.byte()%4)
				var rs []ratelimit.Request
				for i := 0; i < nreq; i++ {
					b := rd.byte()
					r := ratelimit.Request{Name: "x", Key: keys[int(b)%2], Count: rd.count(m), Reserve: b&2 != 0}
					if b&4 != 0 && b&8 != 0 {
						r.Name = "nope"
					}
					rs = append(rs, r)
				}
				ctxt += fmt.Sprintf(" LimitMany %v", rs)
				skip := false
				for _, r := range rs {
					if n, e := m.countErr(r.Count, r.Reserve); e == nil && r.Reserve && r.Name == "x" && m.b[r.Key].value-n < -1e299 {
						skip = true
					}
				}
				if skip {
					continue
				}
				ds := l.LimitMany(ctx, rs, nil)
				if len(ds) != len(rs) {
					t.Fatalf("%s: %d decisions", ctxt, len(ds))
				}
				for i, r := range rs {
					if r.Name == "nope" {
						if !errors.Is(ds[i].Err, ratelimit.ErrUnknownLimit) {
							t.Fatalf("%s: decision %d: %+v", ctxt, i, ds[i])
						}
						continue
					}
					n, e := m.countErr(r.Count, r.Reserve)
					if e != nil {
						if !errors.Is(ds[i].Err, e) {
							t.Fatalf("%s: decision %d: %+v, want %v", ctxt, i, ds[i], e)
						}
						continue
					}
					if inDebtRegion(r.Key, n) && r.Reserve {
						t.Skip("debt region")
					}
					ok, v, ts := m.take(r.Key, now, n, r.Reserve)
					if ds[i].Err != nil || ds[i].OK != ok {
						t.Fatalf("%s: decision %d: %+v, want OK %v", ctxt, i, ds[i], ok)
					}
					if ok {
						m.store(r.Key, v, ts)
					}
				}
				checkAll(ctxt)
			default: // move the clock
				var d int64
				switch rd.byte() % 5 {
				case 0:
					d = int64(rd.byte()) * (m.period/16 + 1)
				case 1:
					d = -int64(rd.byte()) * (m.period/64 + 1)
				case 2:
					d = int64(rd.u64() % uint64(10*365*24*time.Hour))
				case 3:
					d = -int64(rd.u64() % uint64(10*365*24*time.Hour))
				default:
					d = int64(rd.byte()) // a few ns
				}
				now = min(max(now+d, hiLo), hiHi)
				setClock(now)
				checkAll(ctxt + fmt.Sprintf(" clock %+d", d))
			}
		}
	})
}

// FuzzHostileSharded drives a sharded limit (2..8 shards, integer per-shard
// rate and capacity) with fuzzed requests and clock moves and checks the
// accounting guarantees rather than the random shard choice: with the
// clock frozen, Value is exactly capacity minus the sum of acknowledged
// grants plus credits (capped); denials and errors change nothing; a
// request above two shards' worth is ErrInvalidCount; when time passes the
// value rises by at most the refill; it never exceeds capacity nor falls
// below -maxReserved.
func FuzzHostileSharded(f *testing.F) {
	f.Add(uint8(0), uint8(2), uint8(10), uint8(5), []byte{0, 10, 0, 10, 0, 10, 1, 3, 2, 7, 3, 20, 4, 0, 5, 9})
	f.Add(uint8(1), uint8(4), uint8(3), uint8(0), []byte{0, 6, 0, 6, 0, 6, 0, 6, 5, 5, 2, 9, 3, 1, 0, 6})
	f.Add(uint8(0), uint8(7), uint8(1), uint8(1), []byte{6, 2, 6, 2, 0, 14, 1, 255, 4, 0, 5, 250})
	f.Fuzz(func(t *testing.T, kindB, shardsB, perCapB, perResB uint8, ops []byte) {
		ctx := context.Background()
		n := 2 + int(shardsB%7)
		perCap := float64(1 + perCapB%20)
		perRes := float64(perResB % 8)
		cfg := ratelimit.Config{Kind: ratelimit.TokenBucket, Rate: perCap * float64(n), Period: time.Minute,
			Capacity: perCap * float64(n), MaxReserved: perRes * float64(n), Shards: n}
		if kindB&1 == 1 {
			cfg.Kind = ratelimit.FixedWindow
		}
		capacity, maxRes := cfg.Capacity, cfg.MaxReserved
		clk := ratelimittest.NewClock(hiT0)
		l, err := ratelimit.Open(ratelimit.Options{Now: clk.Now, Limits: map[string]ratelimit.Config{"s": cfg}, SweepInterval: -1, Partitions: 1 + int(kindB>>1)%4})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		keys := []string{"", "k"}
		want := map[string]float64{"": capacity, "k": capacity}
		now := hiT0
		val := func(k string) float64 { return hiValue(t, l, "s", k).Value }
		rd := &hiReader{b: ops}
		counts := []float64{1, 2, 0.5, perCap, 2 * perCap, perCap + 1, 2*perCap + 1, math.Nextafter(2*perCap, 99), 3, 0, -1, math.NaN(),
			perCap + perRes, 2 * (perCap + perRes), 2*(perCap+perRes) + 1}
		for step := 0; step < 64 && len(rd.b) > 0; step++ {
			op := rd.byte() % 7
			b := rd.byte()
			key := keys[int(b)%2]
			count := counts[int(b>>1)%len(counts)]
			reserve := b&0x80 != 0 && maxRes > 0 // unlimited debt has no bound to check
			ctxt := fmt.Sprintf("step %d op %d cfg %+v key %q count %v reserve %v", step, op, cfg, key, count, reserve)
			most := 2 * perCap
			if reserve {
				most = 2 * (perCap + perRes)
			}
			c := count
			if c == 0 {
				c = 1
			}
			invalid := math.IsNaN(c) || c < 0 || c > most
			switch op {
			case 0, 1: // Limit or Check
				r := ratelimit.Request{Name: "s", Key: key, Count: count, Reserve: reserve}
				var st ratelimit.Status
				if op == 0 {
					st, err = l.Limit(ctx, r)
				} else {
					st, err = l.Check(ctx, r)
				}
				if invalid {
					if !errors.Is(err, ratelimit.ErrInvalidCount) {
						t.Fatalf("%s: %v, want ErrInvalidCount", ctxt, err)
					}
				} else if err != nil {
					t.Fatalf("%s: %v", ctxt, err)
				} else if st.OK && op == 0 {
					want[key] -= c
				} else if !st.OK && st.RetryAfter <= 0 {
					t.Fatalf("%s: denied with RetryAfter %v", ctxt, st.RetryAfter)
				}
			case 2: // LimitAll over both keys
				c2 := counts[int(rd.byte())%len(counts)]
				if c2 == 0 {
					c2 = 1
				}
				inv2 := math.IsNaN(c2) || c2 < 0 || c2 > most
				st, err := l.LimitAll(ctx, ratelimit.Request{Name: "s", Key: "", Count: count, Reserve: reserve}, ratelimit.Request{Name: "s", Key: "k", Count: c2, Reserve: reserve})
				if invalid || inv2 {
					if !errors.Is(err, ratelimit.ErrInvalidCount) {
						t.Fatalf("%s c2 %v: %v, want ErrInvalidCount", ctxt, c2, err)
					}
				} else if err != nil {
					t.Fatalf("%s: %v", ctxt, err)
				} else if st.OK {
					want[""] -= c
					want["k"] -= c2
				}
			case 3: // LimitMany, same key twice
				ds := l.LimitMany(ctx, []ratelimit.Request{{Name: "s", Key: key, Count: count, Reserve: reserve}, {Name: "s", Key: key, Count: 1}}, nil)
				for i, d := range ds {
					ci, inv := c, invalid
					if i == 1 {
						ci, inv = 1, false
					}
					if inv {
						if !errors.Is(d.Err, ratelimit.ErrInvalidCount) {
							t.Fatalf("%s: decision %d %+v", ctxt, i, d)
						}
						continue
					}
					if d.Err != nil {
						t.Fatalf("%s: decision %d %+v", ctxt, i, d)
					}
					if d.OK {
						want[key] -= ci
					}
				}
			case 4: // Credit
				err := l.Credit(ctx, "s", key, count)
				if math.IsNaN(count) || count < 0 {
					if !errors.Is(err, ratelimit.ErrInvalidCount) {
						t.Fatalf("%s: credit %v", ctxt, err)
					}
				} else if err != nil {
					t.Fatalf("%s: credit %v", ctxt, err)
				} else {
					want[key] = math.Min(want[key]+count, capacity)
				}
			case 5: // Reset
				if err := l.Reset(ctx, "s", key); err != nil {
					t.Fatal(err)
				}
				want[key] = capacity
			default: // move the clock; the value may only rise, by at most the refill
				d := time.Duration(int64(rd.byte())-64) * time.Second
				next := now.Add(d)
				for _, k := range keys {
					before := val(k)
					clk.Set(next)
					after := val(k)
					clk.Set(now)
					// Back: the projection of a state written earlier may
					// fall back into its own window or refill, never rise.
					if d <= 0 && after > before {
						t.Fatalf("%s: clock back %v raised %q: %v -> %v", ctxt, d, k, before, after)
					}
					refill := cfg.Rate * d.Minutes()
					if cfg.Kind == ratelimit.FixedWindow {
						refill = cfg.Rate * math.Ceil(d.Minutes())
					}
					if d > 0 && (after < before || after-before > refill+1e-9) {
						t.Fatalf("%s: clock +%v moved %q from %v to %v (refill at most %v)", ctxt, d, k, before, after, refill)
					}
				}
				if d > 0 {
					now = next
				}
				clk.Set(now)
				for _, k := range keys {
					want[k] = val(k)
				}
			}
			for _, k := range keys {
				got := val(k)
				if math.Abs(got-want[k]) > 1e-9*capacity {
					t.Fatalf("%s: Value(%q) = %v, want %v (capacity %v)", ctxt, k, got, want[k], capacity)
				}
				if got > capacity || maxRes > 0 && got < -maxRes-1e-9 {
					t.Fatalf("%s: Value(%q) = %v outside [-%v, %v]", ctxt, k, got, maxRes, capacity)
				}
			}
		}
	})
}
