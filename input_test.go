package ratelimit

// Bad input of every kind: counts, configs, names, keys, options. Each is a
// documented sentinel error and changes nothing.

import (
	"context"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed7fbd42b6/ratelimit/internal/wal"
)

// Counts that are negative, NaN, infinite, above capacity (plus
// MaxReserved for a reservation) or above two shards' worth are
// ErrInvalidCount from every method, and take nothing; the boundaries
// themselves are valid. "Above" is as the decision computes it: where the
// sum capacity + MaxReserved rounds up past what full buckets grant, the
// count is refused, not denied with a RetryAfter that never comes. Grantable
// agrees.
func TestInvalidCount(t *testing.T) {
	cfgs := map[string]Config{
		"tb":    tb(10, M),
		"fw":    fw(10, M, t0),
		"tbres": withMaxRes(tb(10, M), 5),
		"fwres": withMaxRes(fw(10, M, t0), 5),
		"sh":    withShards(tb(40, M), 4),
		"tenth": withMaxRes(tb(1, H), 0.1),              // 1 - 1.1 < -0.1 in float64
		"sh6":   withShards(withMaxRes(tb(8, M), 4), 6), // two full shards split 4 into halves just past -4/6
	}
	cases := []struct {
		name    string
		lim     string
		count   float64
		reserve bool
	}{
		{"negative", "tb", -1, false},
		{"negative reserve", "tb", -1, true},
		{"tiny negative", "fw", -1e-300, false},
		{"NaN", "tb", math.NaN(), false},
		{"NaN reserve", "fw", math.NaN(), true},
		{"+Inf", "tb", math.Inf(1), false},
		{"+Inf reserve", "tb", math.Inf(1), true},
		{"-Inf", "fw", math.Inf(-1), false},
		{"above capacity tb", "tb", 10.5, false},
		{"above capacity fw", "fw", 11, false},
		{"above capacity+maxReserved tb", "tbres", 15.001, true},
		{"above capacity+maxReserved fw", "fwres", 16, true},
		{"above capacity no reserve with maxReserved", "tbres", 11, false},
		{"above two shards", "sh", 21, false},
		{"capacity+maxReserved rounded up", "tenth", 1.1, true},
		{"two shards' worth rounded up", "sh6", 4, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			l := open(t, Options{Now: clk.Now, Limits: cfgs})
			// leave some state behind so "nothing consumed" is not just "absent"
			limit(t, l, Request{Name: tc.lim, Key: "k", Count: 0.5})
			before := value(t, l, tc.lim, "k")
			r := Request{Name: tc.lim, Key: "k", Count: tc.count, Reserve: tc.reserve}
			if ok, err := l.Grantable(r); ok {
				t.Errorf("Grantable(%s) = true, %v", reqString(r), err)
			}
			if _, err := l.Limit(bg, r); !errors.Is(err, ErrInvalidCount) {
				t.Errorf("Limit(%s): err = %v, want ErrInvalidCount", reqString(r), err)
			}
			if _, err := l.Check(bg, r); !errors.Is(err, ErrInvalidCount) {
				t.Errorf("Check(%s): err = %v, want ErrInvalidCount", reqString(r), err)
			}
			if _, err := l.LimitAll(bg, Request{Name: tc.lim, Key: "other", Count: 1}, r); !errors.Is(err, ErrInvalidCount) {
				t.Errorf("LimitAll(ok, %s): err = %v, want ErrInvalidCount", reqString(r), err)
			}
			ds := l.LimitMany(bg, []Request{r}, nil)
			if len(ds) != 1 || !errors.Is(ds[0].Err, ErrInvalidCount) {
				t.Errorf("LimitMany(%s) = %+v, want one ErrInvalidCount", reqString(r), ds)
			}
			after := value(t, l, tc.lim, "k")
			if after.Value != before.Value || !after.TS.Equal(before.TS) {
				t.Errorf("invalid count consumed: value %v -> %v", before.Value, after.Value)
			}
			wantValue(t, l, tc.lim, "other", value(t, l, tc.lim, "never").Value)
		})
	}
	t.Run("boundaries are valid", func(t *testing.T) {
		clk := newClock()
		l := open(t, Options{Now: clk.Now, Limits: cfgs})
		ok := []Request{
			{Name: "tb", Key: "a", Count: 10},
			{Name: "fw", Key: "a", Count: 10},
			{Name: "tbres", Key: "a", Count: 15, Reserve: true},
			{Name: "fwres", Key: "a", Count: 15, Reserve: true},
			{Name: "tb", Key: "b", Count: 1000, Reserve: true}, // unlimited reservations
			{Name: "sh", Key: "a", Count: 20},
			{Name: "tenth", Key: "a", Count: 1.09, Reserve: true},
			{Name: "sh6", Key: "a", Count: 3.99, Reserve: true},
		}
		for _, r := range ok {
			if ok, err := l.Grantable(r); !ok || err != nil {
				t.Errorf("Grantable(%s) = %v, %v; want true", reqString(r), ok, err)
			}
			st, err := l.Limit(bg, r)
			if err != nil || !st.OK {
				t.Errorf("Limit(%s) = %+v, %v; want granted", reqString(r), st, err)
			}
		}
		wantValue(t, l, "tbres", "a", -5)
		wantValue(t, l, "fwres", "a", -5)
		wantValue(t, l, "tb", "b", -990)
	})
}

// Configs that break a rule are ErrInvalidConfig at Open and inline, even
// over a configured name, in LimitAll and (alone) in LimitMany; edge
// configs that keep the rules open.
func TestInvalidConfig(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	good := tb(10, M)
	cases := []struct {
		name string
		cfg  Config
	}{
		{"zero config", Config{}},
		{"unknown kind 0", Config{Rate: 1, Period: S}},
		{"unknown kind 3", Config{Kind: 3, Rate: 1, Period: S}},
		{"unknown kind -1", Config{Kind: -1, Rate: 1, Period: S}},
		{"rate NaN", tb(nan, S)},
		{"rate +Inf", tb(inf, S)},
		{"rate -Inf", fw(-inf, S, t0)},
		{"rate negative", tb(-1, S)},
		{"rate zero", tb(0, S)},
		{"rate zero fw", fw(0, S, t0)},
		{"period zero", tb(1, 0)},
		{"period negative", fw(1, -S, t0)},
		{"capacity negative", withCap(good, -1)},
		{"capacity NaN", withCap(good, nan)},
		{"capacity +Inf", withCap(good, inf)},
		{"maxReserved negative", withMaxRes(good, -1)},
		{"maxReserved NaN", withMaxRes(good, nan)},
		{"maxReserved +Inf", withMaxRes(good, inf)},
		{"shards negative", withShards(good, -1)},
		{"start on token bucket", Config{Kind: TokenBucket, Rate: 1, Period: S, Start: t0}},
		{"period MinInt64", tb(1, math.MinInt64)},
		{"shards above MaxShards", withShards(tb(1, 1), MaxShards+1)},
		{"per-shard rate underflows", withShards(tb(5e-324, 1), 2)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			l, err := Open(Options{Limits: map[string]Config{"good": good, "bad": tc.cfg}, Now: clk.Now})
			if !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("Open with %+v: err = %v, want ErrInvalidConfig", tc.cfg, err)
			}
			if l != nil {
				_ = l.Close()
			}

			// inline
			l = open(t, Options{Now: clk.Now, Limits: map[string]Config{"good": good}})
			c := tc.cfg
			r := Request{Name: "inline", Key: "k", Config: &c}
			if _, err := l.Limit(bg, r); !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("Limit inline %+v: err = %v, want ErrInvalidConfig", tc.cfg, err)
			}
			if _, err := l.Check(bg, r); !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("Check inline %+v: err = %v, want ErrInvalidConfig", tc.cfg, err)
			}
			// an inline config wins even over a configured name
			r2 := Request{Name: "good", Key: "k", Config: &c}
			if _, err := l.Limit(bg, r2); !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("Limit inline on a configured name %+v: err = %v, want ErrInvalidConfig", tc.cfg, err)
			}
			if _, err := l.LimitAll(bg, Request{Name: "good", Key: "x"}, r); !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("LimitAll with inline %+v: err = %v, want ErrInvalidConfig", tc.cfg, err)
			}
			ds := l.LimitMany(bg, []Request{{Name: "good", Key: "y"}, r}, nil)
			if len(ds) != 2 || ds[0].Err != nil || !ds[0].OK || !errors.Is(ds[1].Err, ErrInvalidConfig) {
				t.Errorf("LimitMany(good, inline %+v) = %+v, want [granted, ErrInvalidConfig]", tc.cfg, ds)
			}
			wantValue(t, l, "good", "k", 10)
			wantValue(t, l, "good", "x", 10)
			wantValue(t, l, "good", "y", 9)
		})
	}
	t.Run("valid edge configs open", func(t *testing.T) {
		clk := newClock()
		l, err := Open(Options{Now: clk.Now, Limits: map[string]Config{
			"tiny rate":   tb(1e-9, H),
			"1ns period":  tb(1, 1),
			"shards 1":    withShards(tb(1, S), 1),
			"fw no start": fw(1, S, time.Time{}),
		}})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		_ = l.Close()
		l, err = Open(Options{Now: clk.Now})
		if err != nil {
			t.Fatalf("Open with no limits: %v", err)
		}
		_ = l.Close()
	})
}

// A name neither configured nor carrying an inline config is
// ErrUnknownLimit from every method; names match exactly.
func TestUnknownLimit(t *testing.T) {
	clk := newClock()
	l := open(t, Options{Now: clk.Now, Limits: map[string]Config{"a": tb(10, M)}})
	for _, name := range []string{"b", "", "A", "a "} {
		r := Request{Name: name, Key: "k"}
		if _, err := l.Limit(bg, r); !errors.Is(err, ErrUnknownLimit) {
			t.Errorf("Limit(%q): err = %v, want ErrUnknownLimit", name, err)
		}
		if _, err := l.Check(bg, r); !errors.Is(err, ErrUnknownLimit) {
			t.Errorf("Check(%q): err = %v, want ErrUnknownLimit", name, err)
		}
		if _, err := l.Value(bg, name, "k"); !errors.Is(err, ErrUnknownLimit) {
			t.Errorf("Value(%q): err = %v, want ErrUnknownLimit", name, err)
		}
		if _, err := l.LimitAll(bg, Request{Name: "a", Key: "k"}, r); !errors.Is(err, ErrUnknownLimit) {
			t.Errorf("LimitAll(a, %q): err = %v, want ErrUnknownLimit", name, err)
		}
		ds := l.LimitMany(bg, []Request{r}, nil)
		if len(ds) != 1 || !errors.Is(ds[0].Err, ErrUnknownLimit) {
			t.Errorf("LimitMany(%q) = %+v, want ErrUnknownLimit", name, ds)
		}
	}
	wantValue(t, l, "a", "k", 10)
}

// Every bad input of every method is a documented sentinel and changes
// nothing; mixtures in LimitAll take nothing, in LimitMany each is decided
// alone.
func TestBadInputIsSentinelAndLosesNothing(t *testing.T) {
	ctx := context.Background()
	nan, inf := math.NaN(), math.Inf(1)
	longKey := strings.Repeat("k", MaxKeyLen+1)
	longName := strings.Repeat("n", MaxKeyLen+1)
	sh := tb(40, time.Minute)
	sh.Shards = 4
	limits := map[string]Config{"tb": tb(10, time.Minute), "fw": fw(10, time.Minute, time.Time{}), "sh": sh,
		"res": {Kind: TokenBucket, Rate: 10, Period: time.Minute, MaxReserved: 5}}
	cfgp := func(c Config) *Config { return &c }
	subCap := tb(1, time.Second)
	subCap.Capacity, subCap.Shards = 5e-324, 2
	cases := []struct {
		name string
		r    Request
		want error
	}{
		{"NaN", Request{Name: "tb", Key: "k", Count: nan}, ErrInvalidCount},
		{"-NaN reserve", Request{Name: "res", Key: "k", Count: -nan, Reserve: true}, ErrInvalidCount},
		{"+Inf", Request{Name: "fw", Key: "k", Count: inf}, ErrInvalidCount},
		{"+Inf reserve unlimited", Request{Name: "tb", Key: "k", Count: inf, Reserve: true}, ErrInvalidCount},
		{"-Inf", Request{Name: "tb", Key: "k", Count: -inf}, ErrInvalidCount},
		{"negative subnormal", Request{Name: "tb", Key: "k", Count: -5e-324}, ErrInvalidCount},
		{"MaxFloat64", Request{Name: "tb", Key: "k", Count: math.MaxFloat64}, ErrInvalidCount},
		{"just above capacity", Request{Name: "tb", Key: "k", Count: math.Nextafter(10, 11)}, ErrInvalidCount},
		{"above cap+maxReserved", Request{Name: "res", Key: "k", Count: math.Nextafter(15, 16), Reserve: true}, ErrInvalidCount},
		{"above two shards", Request{Name: "sh", Key: "k", Count: 20.5}, ErrInvalidCount},
		{"unknown", Request{Name: "nope", Key: "k"}, ErrUnknownLimit},
		{"unknown NUL", Request{Name: "tb\x00", Key: "k"}, ErrUnknownLimit},
		{"unknown long name", Request{Name: longName, Key: "k"}, ErrUnknownLimit},
		{"long key", Request{Name: "tb", Key: longKey}, ErrInvalidKey},
		{"long inline name", Request{Name: longName, Key: "k", Config: cfgp(tb(1, time.Second))}, ErrInvalidConfig},
		{"inline zero", Request{Name: "i", Key: "k", Config: &Config{}}, ErrInvalidConfig},
		{"inline subnormal capacity sharded", Request{Name: "i", Key: "k", Config: &subCap}, ErrInvalidConfig},
		{"inline too many shards", Request{Name: "i", Key: "k", Config: &Config{Kind: TokenBucket, Rate: 1, Period: 1, Shards: MaxShards + 1}}, ErrInvalidConfig},
		{"inline NaN capacity", Request{Name: "i", Key: "k", Config: &Config{Kind: TokenBucket, Rate: 1, Period: 1, Capacity: nan}}, ErrInvalidConfig},
		{"inline conflict: same name, capacity 2, count 3", Request{Name: "tb", Key: "k", Count: 3, Config: cfgp(tb(2, time.Minute))}, ErrInvalidCount},
	}
	clk := newClock()
	l := open(t, Options{Now: clk.Now, Limits: limits})
	for _, n := range []string{"tb", "fw", "sh", "res"} {
		if _, err := l.Limit(ctx, Request{Name: n, Key: "k", Count: 3}); err != nil {
			t.Fatal(err)
		}
	}
	snap := func() map[string]float64 {
		m := map[string]float64{}
		for _, n := range []string{"tb", "fw", "sh", "res"} {
			for _, k := range []string{"k", "j"} {
				m[n+"/"+k] = value(t, l, n, k).Value
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
			good := Request{Name: "tb", Key: "j", Count: 1}
			for pos := 0; pos < 2; pos++ {
				rs := []Request{good, c.r}
				if pos == 1 {
					rs = []Request{c.r, good}
				}
				if _, err := l.LimitAll(ctx, rs...); !errors.Is(err, c.want) {
					t.Errorf("LimitAll pos %d: %v, want %v", pos, err, c.want)
				}
			}
			ds := l.LimitMany(ctx, []Request{c.r, {Name: "tb", Key: "j", Count: 1}, c.r}, nil)
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
		if err := l.Credit(ctx, "tb", "k", bad); !errors.Is(err, ErrInvalidCount) {
			t.Errorf("Credit(%v): %v", bad, err)
		}
	}
	if err := l.Credit(ctx, "nope", "k", 1); !errors.Is(err, ErrUnknownLimit) {
		t.Errorf("Credit unknown: %v", err)
	}
	if err := l.Credit(ctx, "tb", longKey, 1); !errors.Is(err, ErrInvalidKey) {
		t.Errorf("Credit long key: %v", err)
	}
	if err := l.Reset(ctx, "nope", "k"); !errors.Is(err, ErrUnknownLimit) {
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

// Configs at the edges of the rules (subnormal and maximal numbers, -0,
// odd names) and Partitions at both ends work as documented. (Refused
// configs and options: TestInvalidConfig, TestOpenRejectsInvalidOptions.)
func TestConfigEdges(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	okCfgs := map[string]Config{
		"subnormal rate":               tb(5e-324, time.Hour),
		"max rate":                     tb(math.MaxFloat64, 1),
		"max capacity":                 {Kind: TokenBucket, Rate: 1, Period: 1, Capacity: math.MaxFloat64},
		"max period tb":                tb(1, math.MaxInt64),
		"max period fw":                fw(1, math.MaxInt64, time.Time{}),
		"1ns fw":                       fw(1, 1, time.Time{}),
		"max shards":                   {Kind: TokenBucket, Rate: 65536, Period: time.Second, Shards: MaxShards},
		"neg zero capacity":            {Kind: TokenBucket, Rate: 3, Period: 1, Capacity: math.Copysign(0, -1)},
		"neg zero maxReserved":         {Kind: TokenBucket, Rate: 3, Period: 1, MaxReserved: math.Copysign(0, -1)},
		"":                             tb(1, time.Second), // empty name
		"n\x00\xff":                    tb(1, time.Second), // NUL and invalid UTF-8
		strings.Repeat("n", MaxKeyLen): tb(1, time.Second),
	}
	l := open(t, Options{Now: clk.Now, Limits: okCfgs})
	for name, cfg := range okCfgs {
		r := Request{Name: name, Key: "k", Count: math.Min(1, cfg.Rate)}
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
	if st, _ := l.Limit(ctx, Request{Name: "", Key: "z", Count: math.Copysign(0, -1)}); !st.OK || value(t, l, "", "z").Value != 0 {
		t.Errorf("count -0 should take 1: %+v", st)
	}
	// a subnormal count is valid and takes (almost) nothing
	if st, err := l.Limit(ctx, Request{Name: "", Key: "s", Count: 5e-324}); err != nil || !st.OK {
		t.Errorf("subnormal count: %+v, %v", st, err)
	}
	// one Partition, and partitions = MaxPartitions, both work
	for _, p := range []int{1, MaxPartitions} {
		l2 := open(t, Options{Partitions: p, Now: clk.Now, Limits: map[string]Config{"a": tb(2, time.Second)}})
		ds := l2.LimitMany(ctx, []Request{{Name: "a", Key: "x"}, {Name: "a", Key: "y"}, {Name: "a", Key: "x"}, {Name: "a", Key: "x"}}, nil)
		if !ds[0].OK || !ds[1].OK || !ds[2].OK || ds[3].OK {
			t.Errorf("partitions %d: %+v", p, ds)
		}
		l2.Close()
	}
}

// Never-used keys: Check, Value, Reset, Credit treat them as full and write
// nothing; LimitAll and LimitMany with nothing to do, or nothing valid.
func TestNeverUsedKeysAndEmptyCalls(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	sh := tb(40, time.Minute)
	sh.Shards = 4
	l := open(t, Options{Now: clk.Now, Limits: map[string]Config{"tb": tb(10, time.Minute), "fw": fw(10, time.Minute, time.Time{}), "sh": sh}})
	for _, n := range []string{"tb", "fw", "sh"} {
		full := 10.0
		if n == "sh" {
			full = 40
		}
		for _, k := range []string{"", "\x00", "\xff\xfe", strings.Repeat("x", MaxKeyLen)} {
			if st, err := l.Check(ctx, Request{Name: n, Key: k, Count: 1}); err != nil || !st.OK {
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
			if v := value(t, l, n, k); v.Value != full {
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
	if st, err := l.LimitAll(ctx, []Request{}...); err != nil || !st.OK {
		t.Errorf("LimitAll(empty) = %+v, %v", st, err)
	}
	if ds := l.LimitMany(ctx, nil, nil); len(ds) != 0 {
		t.Errorf("LimitMany(nil) = %+v", ds)
	}
	buf := make([]Decision, 5)
	if ds := l.LimitMany(ctx, []Request{}, buf); len(ds) != 0 {
		t.Errorf("LimitMany(empty, buf) = %+v", ds)
	}
	// only invalid, and only sharded, batches
	ds := l.LimitMany(ctx, []Request{{Name: "x"}, {Name: "tb", Count: -1}}, nil)
	if len(ds) != 2 || !errors.Is(ds[0].Err, ErrUnknownLimit) || !errors.Is(ds[1].Err, ErrInvalidCount) {
		t.Errorf("LimitMany(all invalid) = %+v", ds)
	}
	ds = l.LimitMany(ctx, []Request{{Name: "sh", Key: "m", Count: 20}, {Name: "sh", Key: "m", Count: 20}, {Name: "sh", Key: "m", Count: 0.5}}, nil)
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
	if v := value(t, l, "sh", "m").Value; v != 40-granted {
		t.Errorf("sharded LimitMany: value %v, granted %v", v, granted)
	}
}

// A key the log could not record is refused up front: nothing consumed, and
// the requests batched with it are unaffected.
func TestOversizedKeyIsRefusedAlone(t *testing.T) {
	clk := newClock()
	l := open(t, Options{Path: filepath.Join(t.TempDir(), "rl.db"), Limits: durableLimits, Now: clk.Now, Partitions: 1})
	ctx := context.Background()
	huge := strings.Repeat("k", MaxKeyLen+1)
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := 0; i < 200; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			key := "ok"
			if i%50 == 0 {
				key = huge
			}
			_, err := l.Limit(ctx, Request{Name: "big", Key: key})
			if key == huge && !errors.Is(err, ErrInvalidKey) || key != huge && err != nil {
				errs <- err
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("unexpected result: %v", err)
	}
	if _, err := l.Value(ctx, "big", huge); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("Value: %v", err)
	}
	if err := l.Reset(ctx, "big", huge); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("Reset: %v", err)
	}
	if err := l.Credit(ctx, "big", huge, 1); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("Credit: %v", err)
	}
	if _, err := l.LimitAll(ctx, Request{Name: "big", Key: "ok"}, Request{Name: "big", Key: huge}); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("LimitAll: %v", err)
	}
	out := l.LimitMany(ctx, []Request{{Name: "big", Key: huge}, {Name: "big", Key: "ok"}}, nil)
	if !errors.Is(out[0].Err, ErrInvalidKey) || out[1].Err != nil || !out[1].OK {
		t.Fatalf("LimitMany: %+v", out)
	}
	if v := value(t, l, "big", "ok").Value; v != 1e9-197 {
		t.Fatalf("value %v, want exactly 197 taken", v)
	}
	// A key of exactly MaxKeyLen works, durably.
	if s := limit(t, l, Request{Name: "tb", Key: huge[:MaxKeyLen]}); !s.OK {
		t.Fatal("max-length key denied")
	}
}

// Options out of range are refused by Open with ErrInvalidOptions, before
// anything is created at Path.
func TestOpenRejectsInvalidOptions(t *testing.T) {
	for name, mod := range map[string]func(*Options){
		"negative partitions":         func(o *Options) { o.Partitions = -1 },
		"too many partitions":         func(o *Options) { o.Partitions = MaxPartitions + 1 },
		"log preallocation too large": func(o *Options) { o.LogPreallocate = wal.MaxPreallocate + 1 },
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "rl.db")
			o := Options{Path: path, Limits: durableLimits}
			mod(&o)
			l, err := Open(o)
			if !errors.Is(err, ErrInvalidOptions) {
				if err == nil {
					l.Close()
				}
				t.Fatalf("Open: %v, want ErrInvalidOptions", err)
			}
			if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("a refused Open left %s behind: %v", path, err)
			}
		})
	}
}
