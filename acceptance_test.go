package ratelimit_test

// Black-box acceptance tests for package ratelimit, written against the
// public API and ../shared/SEMANTICS.md only. Every test runs in memory
// (Options.Path == "") against a fake clock: scripted (time, count, ok)
// steps at fixed instants, no sleeping.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed7fbd42b6/ratelimit"
	"github.com/seed7fbd42b6/ratelimit/ratelimittest"
)

const (
	S = time.Second
	M = time.Minute
	H = time.Hour
)

// t0 is deliberately not round, so that nothing accidentally aligns.
var t0 = time.Date(2025, time.March, 14, 15, 9, 26, 535897932, time.UTC)

var bg = context.Background()

// ---------------------------------------------------------------- helpers

// fakeClock is the shared test clock.
type fakeClock = ratelimittest.Clock

func newClock(t time.Time) *fakeClock { return ratelimittest.NewClock(t) }

func open(t *testing.T, clk *fakeClock, limits map[string]ratelimit.Config) *ratelimit.Limiter {
	t.Helper()
	return openOpts(t, ratelimit.Options{Limits: limits, Now: clk.Now})
}

func openOpts(t *testing.T, opts ratelimit.Options) *ratelimit.Limiter {
	t.Helper()
	l, err := ratelimit.Open(opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if l == nil {
		t.Fatalf("Open returned nil limiter and nil error")
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func limit(t *testing.T, l *ratelimit.Limiter, r ratelimit.Request) ratelimit.Status {
	t.Helper()
	st, err := l.Limit(bg, r)
	if err != nil {
		t.Fatalf("Limit(%s): unexpected error %v", reqString(r), err)
	}
	return st
}

func value(t *testing.T, l *ratelimit.Limiter, name, key string) ratelimit.Value {
	t.Helper()
	v, err := l.Value(bg, name, key)
	if err != nil {
		t.Fatalf("Value(%q, %q): unexpected error %v", name, shortKey(key), err)
	}
	return v
}

// valEq compares token values. Results that involve a fractional refill may
// differ from the exact real number by float rounding; 1e-9 tokens is far
// below anything observable, and every whole-token case is compared with
// the same helper (an off-by-one is still off by 1).
func valEq(got, want float64) bool {
	if got == want {
		return true
	}
	return math.Abs(got-want) <= 1e-9*math.Max(1, math.Abs(want))
}

func wantValue(t *testing.T, l *ratelimit.Limiter, name, key string, want float64) ratelimit.Value {
	t.Helper()
	v := value(t, l, name, key)
	if !valEq(v.Value, want) {
		t.Errorf("Value(%q, %q) = %v, want %v", name, shortKey(key), v.Value, want)
	}
	return v
}

func shortKey(k string) string {
	if len(k) > 24 {
		return fmt.Sprintf("%q...(%d bytes)", k[:16], len(k))
	}
	return k
}

func reqString(r ratelimit.Request) string {
	s := fmt.Sprintf("name=%q key=%q count=%v reserve=%v", r.Name, shortKey(r.Key), r.Count, r.Reserve)
	if r.Config != nil {
		s += fmt.Sprintf(" inline=%+v", *r.Config)
	}
	return s
}

func tb(rate float64, period time.Duration) ratelimit.Config {
	return ratelimit.Config{Kind: ratelimit.TokenBucket, Rate: rate, Period: period}
}

func fw(rate float64, period time.Duration, start time.Time) ratelimit.Config {
	return ratelimit.Config{Kind: ratelimit.FixedWindow, Rate: rate, Period: period, Start: start}
}

func withCap(c ratelimit.Config, capacity float64) ratelimit.Config {
	c.Capacity = capacity
	return c
}

func withMaxRes(c ratelimit.Config, m float64) ratelimit.Config {
	c.MaxReserved = m
	return c
}

func withShards(c ratelimit.Config, n int) ratelimit.Config {
	c.Shards = n
	return c
}

// ---------------------------------------------------------------- worked cases

// step is one scripted request: at t0+at, ask count (reserve or not), expect
// ok/retry (or err), then expect Value == value with TS == t0+ts.
type step struct {
	at       time.Duration
	count    float64
	reserve  bool
	peek     bool // no request, only check Value
	ok       bool
	retry    time.Duration
	retryMin bool // retry is only a lower bound
	err      error
	value    float64
	ts       time.Duration // expected Value.TS offset from t0
}

func runSteps(t *testing.T, clk *fakeClock, l *ratelimit.Limiter, name, key string, steps []step) {
	t.Helper()
	for i, s := range steps {
		clk.Set(t0.Add(s.at))
		if !s.peek {
			r := ratelimit.Request{Name: name, Key: key, Count: s.count, Reserve: s.reserve}
			st, err := l.Limit(bg, r)
			switch {
			case s.err != nil:
				if !errors.Is(err, s.err) {
					t.Errorf("step %d (t0+%v, %s): err = %v, want %v", i, s.at, reqString(r), err, s.err)
				}
			case err != nil:
				t.Errorf("step %d (t0+%v, %s): unexpected error %v", i, s.at, reqString(r), err)
			default:
				if st.OK != s.ok {
					t.Errorf("step %d (t0+%v, %s): OK = %v, want %v (status %+v)", i, s.at, reqString(r), st.OK, s.ok, st)
				}
				if s.retryMin {
					if st.RetryAfter < s.retry {
						t.Errorf("step %d (t0+%v, %s): RetryAfter = %v, want >= %v", i, s.at, reqString(r), st.RetryAfter, s.retry)
					}
				} else if st.RetryAfter != s.retry {
					t.Errorf("step %d (t0+%v, %s): RetryAfter = %v, want %v", i, s.at, reqString(r), st.RetryAfter, s.retry)
				}
				if st.Limit != name {
					t.Errorf("step %d: Status.Limit = %q, want %q", i, st.Limit, name)
				}
			}
		}
		v, err := l.Value(bg, name, key)
		if err != nil {
			t.Errorf("step %d: Value: %v", i, err)
			continue
		}
		if !valEq(v.Value, s.value) {
			t.Errorf("step %d (t0+%v): Value = %v, want %v", i, s.at, v.Value, s.value)
		}
		if want := t0.Add(s.ts); !v.TS.Equal(want) {
			t.Errorf("step %d (t0+%v): Value.TS = t0%+v, want t0%+v", i, s.at, v.TS.Sub(t0), s.ts)
		}
	}
}

func TestAcceptanceWorkedCases(t *testing.T) {
	fwT0 := fw(10, M, t0)
	cases := []struct {
		name  string
		cfg   ratelimit.Config
		steps []step
	}{
		{"token bucket basic", tb(10, M), []step{
			{at: 0, count: 5, ok: true, value: 5, ts: 0},
			{at: 6 * S, count: 6, ok: true, value: 0, ts: 6 * S},
			{at: 6 * S, count: 10, ok: false, retry: 60 * S, value: 0, ts: 6 * S},
			{at: 36 * S, peek: true, value: 5, ts: 36 * S},
			{at: 66 * S, peek: true, value: 10, ts: 66 * S},
			{at: 10 * H, peek: true, value: 10, ts: 10 * H},
		}},
		{"token bucket reservations", tb(10, M), []step{
			{at: 0, count: 5, ok: true, value: 5, ts: 0},
			{at: 6 * S, count: 16, reserve: true, ok: true, retry: 60 * S, value: -10, ts: 6 * S},
			{at: 36 * S, count: 5, reserve: true, ok: true, retry: 60 * S, value: -10, ts: 36 * S},
			{at: 36 * S, count: 1, ok: false, retry: 66 * S, value: -10, ts: 36 * S},
			{at: 96 * S, peek: true, value: 0, ts: 96 * S},
		}},
		{"fixed window reservations", fwT0, []step{
			{at: 0, count: 5, ok: true, value: 5, ts: 0},
			{at: 60 * S, count: 16, reserve: true, ok: true, retry: 60 * S, value: -6, ts: 60 * S},
			{at: 90 * S, count: 5, reserve: true, ok: true, retry: 90 * S, value: -11, ts: 60 * S},
			{at: 119*S + 999*time.Millisecond, peek: true, value: -11, ts: 60 * S},
			{at: 120 * S, peek: true, value: -1, ts: 120 * S},
			{at: 180 * S, peek: true, value: 9, ts: 180 * S},
			{at: 240 * S, peek: true, value: 10, ts: 240 * S},
		}},
		{"fixed window denial waits for the window", fwT0, []step{
			{at: 0, count: 10, ok: true, value: 0, ts: 0},
			{at: 30 * S, count: 1, ok: false, retry: 30 * S, value: 0, ts: 0},
			{at: 59*S + 999*time.Millisecond, count: 1, ok: false, retry: time.Millisecond, value: 0, ts: 0},
			{at: 59*S + 999*time.Millisecond, count: 10, ok: false, retry: time.Millisecond, value: 0, ts: 0},
			{at: 60 * S, count: 1, ok: true, value: 9, ts: 60 * S},
			{at: 61 * S, count: 10, ok: false, retry: 59 * S, value: 9, ts: 60 * S},
			{at: 150 * S, count: 10, ok: true, value: 0, ts: 120 * S},
		}},
		{"fixed window needing several windows", withCap(fw(3, M, t0), 9), []step{
			{at: 0, count: 9, ok: true, value: 0, ts: 0},
			{at: 10 * S, count: 7, ok: false, retry: 170 * S, value: 0, ts: 0},
			{at: 179 * S, count: 7, ok: false, retry: 1 * S, value: 6, ts: 120 * S},
			{at: 180 * S, count: 7, ok: true, value: 2, ts: 180 * S},
		}},
		{"token bucket maxReserved", withMaxRes(tb(1, H), 1), []step{
			{at: 0, count: 2, reserve: true, ok: true, retry: H, value: -1, ts: 0},
			{at: 0, count: 1, ok: false, retry: 2 * H, value: -1, ts: 0},
			// a reservation that would leave debt 2 > maxReserved 1 is denied
			{at: 0, count: 1, reserve: true, ok: false, retry: H, retryMin: true, value: -1, ts: 0},
			{at: H, count: 1, reserve: true, ok: true, retry: H, value: -1, ts: H},
		}},
		{"fixed window maxReserved", withMaxRes(fw(1, H, t0), 1), []step{
			{at: 0, count: 2, reserve: true, ok: true, retry: H, value: -1, ts: 0},
			{at: 0, count: 1, ok: false, retry: 2 * H, value: -1, ts: 0},
			{at: 0, count: 1, reserve: true, ok: false, retry: H, retryMin: true, value: -1, ts: 0},
			{at: H, count: 1, reserve: true, ok: true, retry: H, value: -1, ts: H},
		}},
		{"token bucket count above capacity", tb(1, S), []step{
			{at: 0, count: 2, err: ratelimit.ErrInvalidCount, value: 1, ts: 0},
			{at: 0, count: 1, ok: true, value: 0, ts: 0},
			{at: 0, count: 2, err: ratelimit.ErrInvalidCount, value: 0, ts: 0},
		}},
		{"fixed window count above capacity", fw(1, S, t0), []step{
			{at: 0, count: 2, err: ratelimit.ErrInvalidCount, value: 1, ts: 0},
			{at: 0, count: 1, ok: true, value: 0, ts: 0},
		}},
		{"token bucket capacity above rate", withCap(tb(10, M), 20), []step{
			{at: 0, peek: true, value: 20, ts: 0},
			{at: 0, count: 20, ok: true, value: 0, ts: 0},
			{at: 0, count: 1, ok: false, retry: 6 * S, value: 0, ts: 0},
			{at: 6 * S, peek: true, value: 1, ts: 6 * S},
			{at: 2 * M, peek: true, value: 20, ts: 2 * M},
			{at: 3 * M, count: 20, ok: true, value: 0, ts: 3 * M},
		}},
		{"token bucket capacity below rate", withCap(tb(10, M), 3), []step{
			{at: 0, count: 4, err: ratelimit.ErrInvalidCount, value: 3, ts: 0},
			{at: 0, count: 3, ok: true, value: 0, ts: 0},
			{at: 6 * S, count: 1, ok: true, value: 0, ts: 6 * S},
			{at: 10 * M, peek: true, value: 3, ts: 10 * M},
		}},
		{"fixed window capacity above rate", withCap(fw(10, M, t0), 25), []step{
			{at: 0, peek: true, value: 25, ts: 0},
			{at: 1 * S, count: 25, ok: true, value: 0, ts: 0},
			{at: 60 * S, peek: true, value: 10, ts: 60 * S},
			{at: 61 * S, count: 11, ok: false, retry: 59 * S, value: 10, ts: 60 * S},
			{at: 180 * S, peek: true, value: 25, ts: 180 * S},
		}},
		{"count 0 means 1 (token bucket)", tb(3, M), []step{
			{at: 0, count: 0, ok: true, value: 2, ts: 0},
			{at: 0, count: 0, ok: true, value: 1, ts: 0},
			{at: 0, count: 0, ok: true, value: 0, ts: 0},
			{at: 0, count: 0, ok: false, retry: 20 * S, value: 0, ts: 0},
		}},
		{"count 0 means 1 (fixed window)", fw(2, M, t0), []step{
			{at: 0, count: 0, ok: true, value: 1, ts: 0},
			{at: 0, count: 0, ok: true, value: 0, ts: 0},
			{at: 0, count: 0, ok: false, retry: M, value: 0, ts: 0},
		}},
		{"fractional counts", tb(4, S), []step{
			{at: 0, count: 0.5, ok: true, value: 3.5, ts: 0},
			{at: 0, count: 3.25, ok: true, value: 0.25, ts: 0},
			{at: 0, count: 0.5, ok: false, retry: 62500 * time.Microsecond, value: 0.25, ts: 0},
			{at: 62500 * time.Microsecond, count: 0.5, ok: true, value: 0, ts: 62500 * time.Microsecond},
		}},
		{"fixed window start after now aligns backwards", fw(10, M, t0.Add(90*S)), []step{
			{at: 0, peek: true, value: 10, ts: -30 * S},
			{at: 0, count: 10, ok: true, value: 0, ts: -30 * S},
			{at: 0, count: 1, ok: false, retry: 30 * S, value: 0, ts: -30 * S},
			{at: 30 * S, count: 1, ok: true, value: 9, ts: 30 * S},
		}},
		{"fixed window start long before now", fw(5, 7*S, t0.Add(-1000*7*S+3*time.Nanosecond)), []step{
			// windows start at t0-7s+3ns and t0+3ns
			{at: 0, peek: true, value: 5, ts: -7*S + 3},
			{at: 0, count: 5, ok: true, value: 0, ts: -7*S + 3},
			{at: 0, count: 1, ok: false, retry: 3, value: 0, ts: -7*S + 3},
			{at: 2, count: 1, ok: false, retry: 1, value: 0, ts: -7*S + 3},
			{at: 3, count: 1, ok: true, value: 4, ts: 3},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock(t0)
			l := open(t, clk, map[string]ratelimit.Config{"lim": tc.cfg})
			runSteps(t, clk, l, "lim", "k", tc.steps)
		})
	}
}

func TestAcceptanceStatusOnGrant(t *testing.T) {
	clk := newClock(t0)
	l := open(t, clk, map[string]ratelimit.Config{"a": tb(10, M), "f": fw(10, M, t0)})
	for _, name := range []string{"a", "f"} {
		st := limit(t, l, ratelimit.Request{Name: name, Key: "k", Count: 3})
		if !st.OK || st.RetryAfter != 0 || st.Limit != name {
			t.Errorf("%s: plain grant status = %+v, want {OK:true RetryAfter:0 Limit:%q}", name, st, name)
		}
		// a reservation that fits needs no wait
		st = limit(t, l, ratelimit.Request{Name: name, Key: "k", Count: 3, Reserve: true})
		if !st.OK || st.RetryAfter != 0 {
			t.Errorf("%s: reservation within capacity = %+v, want OK with RetryAfter 0", name, st)
		}
	}
}

func TestAcceptanceValueFresh(t *testing.T) {
	clk := newClock(t0)
	cfgs := map[string]ratelimit.Config{
		"tb":  withCap(tb(10, M), 17),
		"fw":  withCap(fw(10, M, t0.Add(-25*S)), 13),
		"tbd": tb(7, 3*S),
	}
	l := open(t, clk, cfgs)
	v := wantValue(t, l, "tb", "fresh", 17)
	if !v.TS.Equal(t0) {
		t.Errorf("fresh token bucket TS = %v, want now %v", v.TS, t0)
	}
	if v.Config.Kind != ratelimit.TokenBucket || v.Config.Rate != 10 || v.Config.Period != M || v.Config.Capacity != 17 {
		t.Errorf("Value.Config = %+v, want the limit's config", v.Config)
	}
	v = wantValue(t, l, "fw", "fresh", 13)
	if !v.TS.Equal(t0.Add(-25 * S)) {
		t.Errorf("fresh fixed window TS = t0%+v, want window start t0-25s", v.TS.Sub(t0))
	}
	if v.Config.Kind != ratelimit.FixedWindow || !v.Config.Start.Equal(t0.Add(-25*S)) {
		t.Errorf("Value.Config = %+v, want the limit's config", v.Config)
	}
	v = wantValue(t, l, "tbd", "", 7) // capacity defaults to rate
	if v.Config.Rate != 7 || v.Config.Period != 3*S {
		t.Errorf("Value.Config = %+v", v.Config)
	}
	if v.Config.Capacity != 0 && v.Config.Capacity != 7 {
		t.Errorf("Value.Config.Capacity = %v, want 7 (or 0 meaning rate)", v.Config.Capacity)
	}
}

// ---------------------------------------------------------------- retryAfter never early

func TestAcceptanceRetryAfterNeverEarly(t *testing.T) {
	start := t0.Add(123456789 * time.Nanosecond)
	cfgs := []ratelimit.Config{
		tb(1, S), tb(7, 3*S), tb(10, M), tb(3, 7*S), tb(1000, H), tb(2.5, S), tb(0.3, S),
		withCap(tb(13, 1100*time.Millisecond), 5), withCap(tb(7, 3*S), 20), tb(1, 1001*time.Millisecond),
		tb(3, 1e9+1), tb(100, 3*S), tb(0.1, 7*M), withMaxRes(tb(7, 3*S), 2),
		fw(1, S, start), fw(7, 3*S, start), fw(10, M, start), fw(3, 7*S, start), fw(2.5, S, start),
		fw(7, 3*S, time.Time{}), fw(0.3, S, start), withCap(fw(7, 3*S, start), 20), fw(3, 1e9+1, time.Time{}),
		withCap(fw(13, 1100*time.Millisecond, time.Time{}), 5),
	}
	delays := []time.Duration{0, 1, 999, 333333333, S + 7, 1234567891, 2*S + 999999999}
	for ci, cfg := range cfgs {
		capacity := cfg.Capacity
		if capacity == 0 {
			capacity = cfg.Rate
		}
		counts := []float64{1, 0.5, capacity, capacity / 3}
		t.Run(fmt.Sprintf("%d/%v-rate%v-per%v-cap%v", ci, cfg.Kind, cfg.Rate, cfg.Period, capacity), func(t *testing.T) {
			clk := newClock(t0)
			l := open(t, clk, map[string]ratelimit.Config{"lim": cfg})
			n := 0
			for _, d := range delays {
				for _, c := range counts {
					if c > capacity {
						continue
					}
					n++
					key := fmt.Sprintf("k%d", n)
					at := t0.Add(time.Duration(n) * 17 * time.Millisecond)
					clk.Set(at)
					if st := limit(t, l, ratelimit.Request{Name: "lim", Key: key, Count: capacity}); !st.OK {
						t.Fatalf("draining a fresh bucket of %v: denied %+v", capacity, st)
					}
					checkNeverEarly(t, clk, l, "lim", key, at.Add(d), c)
				}
			}
		})
	}
}

// checkNeverEarly asks for count at `at` until denied, then retries 1 ms
// before RetryAfter (must be denied) and exactly at it (must be granted).
func checkNeverEarly(t *testing.T, clk *fakeClock, l *ratelimit.Limiter, name, key string, at time.Time, count float64) {
	t.Helper()
	clk.Set(at)
	r := ratelimit.Request{Name: name, Key: key, Count: count}
	var st ratelimit.Status
	for i := 0; ; i++ {
		if i == 1000 {
			t.Fatalf("%s: never denied at a frozen clock", reqString(r))
		}
		st = limit(t, l, r)
		if !st.OK {
			break
		}
		if st.RetryAfter != 0 {
			t.Errorf("%s: plain grant with RetryAfter %v", reqString(r), st.RetryAfter)
		}
	}
	if st.RetryAfter <= 0 {
		t.Errorf("%s at t0%+v: denied with RetryAfter %v, want > 0", reqString(r), at.Sub(t0), st.RetryAfter)
		return
	}
	before := value(t, l, name, key)
	if st.RetryAfter > time.Millisecond {
		clk.Set(at.Add(st.RetryAfter - time.Millisecond))
		if st2 := limit(t, l, r); st2.OK {
			t.Errorf("%s denied at t0%+v with RetryAfter %v, but granted 1ms before that (value before %v)",
				reqString(r), at.Sub(t0), st.RetryAfter, before.Value)
			return
		}
	}
	clk.Set(at.Add(st.RetryAfter))
	if st2 := limit(t, l, r); !st2.OK {
		t.Errorf("%s denied at t0%+v with RetryAfter %v, but retrying exactly then is denied again (%+v, value before %v, value now %v)",
			reqString(r), at.Sub(t0), st.RetryAfter, st2, before.Value, value(t, l, name, key).Value)
	}
}

// ---------------------------------------------------------------- model-based scripts

// model is SEMANTICS.md's arithmetic, with integer-nanosecond times.
type model struct {
	kind     ratelimit.Kind
	rate     float64
	period   int64
	capacity float64
	maxRes   float64
	start    int64
	present  bool
	value    float64
	ts       int64
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

func (m *model) project(now int64) (float64, int64) {
	if m.kind == ratelimit.TokenBucket {
		if !m.present {
			return m.capacity, now
		}
		el := now - m.ts
		ts := now
		if el < 0 {
			el, ts = 0, m.ts
		}
		return math.Min(m.value+float64(el)*m.rate/float64(m.period), m.capacity), ts
	}
	if !m.present {
		return m.capacity, m.start + floorDiv(now-m.start, m.period)*m.period
	}
	k := int64(0)
	if now > m.ts {
		k = (now - m.ts) / m.period
	}
	return math.Min(m.value+m.rate*float64(k), m.capacity), m.ts + k*m.period
}

// limit returns ok, retryAfter, an alternative acceptable retryAfter,
// whether the count is invalid, and whether the decision is too close to a
// float boundary to be compared exactly.
//
// The alternative: a reservation denied for exceeding maxReserved gets, by
// SEMANTICS.md's formula, the wait until the debt is repaid (-value / r);
// the issue asks for "the earliest retry that can succeed", which for the
// same reservation is the wait until the debt fits maxReserved. Both are
// accepted (neither is early for a plain retry of the same request).
func (m *model) limit(now int64, count float64, reserve bool) (ok bool, retry, alt int64, invalid, fuzzy bool) {
	if count == 0 {
		count = 1
	}
	if count > m.capacity && !reserve || reserve && m.maxRes > 0 && count > m.capacity+m.maxRes {
		return false, 0, 0, true, false
	}
	v, ts := m.project(now)
	v -= count
	fuzzy = math.Abs(v) < 1e-6
	if v < 0 {
		if m.kind == ratelimit.TokenBucket {
			retry = int64(math.Ceil(-v * float64(m.period) / m.rate))
		} else {
			q := -v / m.rate
			if math.Abs(q-math.Round(q)) < 1e-9 {
				fuzzy = true
			}
			retry = ts + m.period*int64(math.Ceil(q)) - now
		}
	}
	alt = retry
	if v < 0 && (!reserve || m.maxRes > 0 && -v > m.maxRes) {
		if reserve {
			if math.Abs(-v-m.maxRes) < 1e-6 {
				fuzzy = true
			}
			over := -v - m.maxRes
			if m.kind == ratelimit.TokenBucket {
				alt = int64(math.Ceil(over * float64(m.period) / m.rate))
			} else {
				q := over / m.rate
				if math.Abs(q-math.Round(q)) < 1e-9 {
					fuzzy = true
				}
				alt = ts + m.period*int64(math.Ceil(q)) - now
			}
		}
		return false, retry, alt, false, fuzzy
	}
	m.present, m.value, m.ts = true, v, ts
	return true, retry, alt, false, fuzzy
}

func TestAcceptanceModelScripts(t *testing.T) {
	rates := []float64{1, 2.5, 7, 10, 0.3, 100, 13}
	periods := []time.Duration{S, 3 * S, 7 * S, M, 1100 * time.Millisecond, H, 1e9 + 1}
	for seed := uint64(1); seed <= 300; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0x5eed))
		kind := ratelimit.TokenBucket
		if seed%2 == 0 {
			kind = ratelimit.FixedWindow
		}
		cfg := ratelimit.Config{Kind: kind, Rate: rates[rng.IntN(len(rates))], Period: periods[rng.IntN(len(periods))]}
		if rng.IntN(2) == 0 {
			cfg.Capacity = cfg.Rate * float64(1+rng.IntN(3))
		}
		if rng.IntN(2) == 0 {
			cfg.MaxReserved = cfg.Rate * float64(1+rng.IntN(2))
		}
		if kind == ratelimit.FixedWindow {
			cfg.Start = t0.Add(time.Duration(rng.Int64N(int64(10 * H))))
		}
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			capacity := cfg.Capacity
			if capacity == 0 {
				capacity = cfg.Rate
			}
			m := &model{kind: kind, rate: cfg.Rate, period: int64(cfg.Period), capacity: capacity,
				maxRes: cfg.MaxReserved, start: cfg.Start.UnixNano()}
			clk := newClock(t0)
			l := open(t, clk, map[string]ratelimit.Config{"m": cfg})
			now := t0.UnixNano()
			for i := 0; i < 40; i++ {
				switch x := rng.IntN(10); {
				case x < 3: // same instant
				case x < 9:
					now += rng.Int64N(2 * int64(cfg.Period))
				default: // the clock goes backwards
					now -= rng.Int64N(int64(cfg.Period))
				}
				clk.Set(time.Unix(0, now))
				counts := []float64{0, 1, 2, 0.5, capacity, capacity * 0.7, capacity + 1, capacity * 1.5}
				count := counts[rng.IntN(len(counts))]
				reserve := rng.IntN(4) == 0
				behind := now < m.ts && m.present
				prev := *m
				wantOK, wantRetry, altRetry, wantInvalid, fuzzy := m.limit(now, count, reserve)
				r := ratelimit.Request{Name: "m", Count: count, Reserve: reserve}
				st, err := l.Limit(bg, r)
				ctxt := fmt.Sprintf("step %d at t0%+v, cfg %+v, %s", i, time.Duration(now-t0.UnixNano()), cfg, reqString(r))
				if wantInvalid {
					if !errors.Is(err, ratelimit.ErrInvalidCount) {
						t.Fatalf("%s: err = %v, want ErrInvalidCount", ctxt, err)
					}
				} else if err != nil {
					t.Fatalf("%s: unexpected error %v", ctxt, err)
				} else if st.OK != wantOK {
					if !fuzzy {
						t.Fatalf("%s: OK = %v, want %v (status %+v)", ctxt, st.OK, wantOK, st)
					}
					// borderline in float: follow the library
					*m = prev
					if st.OK {
						m2, _ := l.Value(bg, "m", "")
						m.present, m.value, m.ts = true, m2.Value, m2.TS.UnixNano()
					}
					continue
				} else if !behind && !fuzzy {
					d := st.RetryAfter - time.Duration(wantRetry)
					tol := time.Duration(0)
					if kind == ratelimit.TokenBucket {
						tol = 2
					}
					d2 := st.RetryAfter - time.Duration(altRetry)
					if (d < -tol || d > tol) && (d2 < -tol || d2 > tol) {
						t.Fatalf("%s: RetryAfter = %v, want %v", ctxt, st.RetryAfter, time.Duration(wantRetry))
					}
				}
				v, err := l.Value(bg, "m", "")
				if err != nil {
					t.Fatalf("%s: Value: %v", ctxt, err)
				}
				wv, wts := m.project(now)
				if !valEq(v.Value, wv) && !(fuzzy && math.Abs(v.Value-wv) < 1e-6) {
					t.Fatalf("%s: Value = %v, want %v", ctxt, v.Value, wv)
				}
				if v.TS.UnixNano() != wts && !(m.present && now < m.ts) {
					t.Fatalf("%s: Value.TS = t0%+v, want t0%+v", ctxt, v.TS.Sub(t0), time.Duration(wts-t0.UnixNano()))
				}
				if err == nil && st.OK {
					m.value = v.Value // keep float noise from accumulating
				}
			}
		})
	}
}

// ---------------------------------------------------------------- invalid input

func TestAcceptanceInvalidCount(t *testing.T) {
	cfgs := map[string]ratelimit.Config{
		"tb":    tb(10, M),
		"fw":    fw(10, M, t0),
		"tbres": withMaxRes(tb(10, M), 5),
		"fwres": withMaxRes(fw(10, M, t0), 5),
		"sh":    withShards(tb(40, M), 4),
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
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock(t0)
			l := open(t, clk, cfgs)
			// leave some state behind so "nothing consumed" is not just "absent"
			limit(t, l, ratelimit.Request{Name: tc.lim, Key: "k", Count: 2})
			before := value(t, l, tc.lim, "k")
			r := ratelimit.Request{Name: tc.lim, Key: "k", Count: tc.count, Reserve: tc.reserve}
			if _, err := l.Limit(bg, r); !errors.Is(err, ratelimit.ErrInvalidCount) {
				t.Errorf("Limit(%s): err = %v, want ErrInvalidCount", reqString(r), err)
			}
			if _, err := l.Check(bg, r); !errors.Is(err, ratelimit.ErrInvalidCount) {
				t.Errorf("Check(%s): err = %v, want ErrInvalidCount", reqString(r), err)
			}
			if _, err := l.LimitAll(bg, ratelimit.Request{Name: tc.lim, Key: "other", Count: 1}, r); !errors.Is(err, ratelimit.ErrInvalidCount) {
				t.Errorf("LimitAll(ok, %s): err = %v, want ErrInvalidCount", reqString(r), err)
			}
			ds := l.LimitMany(bg, []ratelimit.Request{r}, nil)
			if len(ds) != 1 || !errors.Is(ds[0].Err, ratelimit.ErrInvalidCount) {
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
		clk := newClock(t0)
		l := open(t, clk, cfgs)
		ok := []ratelimit.Request{
			{Name: "tb", Key: "a", Count: 10},
			{Name: "fw", Key: "a", Count: 10},
			{Name: "tbres", Key: "a", Count: 15, Reserve: true},
			{Name: "fwres", Key: "a", Count: 15, Reserve: true},
			{Name: "tb", Key: "b", Count: 1000, Reserve: true}, // unlimited reservations
			{Name: "sh", Key: "a", Count: 20},
		}
		for _, r := range ok {
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

func TestAcceptanceInvalidConfig(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	good := tb(10, M)
	cases := []struct {
		name string
		cfg  ratelimit.Config
	}{
		{"zero config", ratelimit.Config{}},
		{"unknown kind 0", ratelimit.Config{Rate: 1, Period: S}},
		{"unknown kind 3", ratelimit.Config{Kind: 3, Rate: 1, Period: S}},
		{"unknown kind -1", ratelimit.Config{Kind: -1, Rate: 1, Period: S}},
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
		{"start on token bucket", ratelimit.Config{Kind: ratelimit.TokenBucket, Rate: 1, Period: S, Start: t0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock(t0)
			l, err := ratelimit.Open(ratelimit.Options{
				Limits: map[string]ratelimit.Config{"good": good, "bad": tc.cfg}, Now: clk.Now})
			if !errors.Is(err, ratelimit.ErrInvalidConfig) {
				t.Errorf("Open with %+v: err = %v, want ErrInvalidConfig", tc.cfg, err)
			}
			if l != nil {
				_ = l.Close()
			}

			// inline
			l = open(t, clk, map[string]ratelimit.Config{"good": good})
			c := tc.cfg
			r := ratelimit.Request{Name: "inline", Key: "k", Config: &c}
			if _, err := l.Limit(bg, r); !errors.Is(err, ratelimit.ErrInvalidConfig) {
				t.Errorf("Limit inline %+v: err = %v, want ErrInvalidConfig", tc.cfg, err)
			}
			if _, err := l.Check(bg, r); !errors.Is(err, ratelimit.ErrInvalidConfig) {
				t.Errorf("Check inline %+v: err = %v, want ErrInvalidConfig", tc.cfg, err)
			}
			// an inline config wins even over a configured name
			r2 := ratelimit.Request{Name: "good", Key: "k", Config: &c}
			if _, err := l.Limit(bg, r2); !errors.Is(err, ratelimit.ErrInvalidConfig) {
				t.Errorf("Limit inline on a configured name %+v: err = %v, want ErrInvalidConfig", tc.cfg, err)
			}
			if _, err := l.LimitAll(bg, ratelimit.Request{Name: "good", Key: "x"}, r); !errors.Is(err, ratelimit.ErrInvalidConfig) {
				t.Errorf("LimitAll with inline %+v: err = %v, want ErrInvalidConfig", tc.cfg, err)
			}
			ds := l.LimitMany(bg, []ratelimit.Request{{Name: "good", Key: "y"}, r}, nil)
			if len(ds) != 2 || ds[0].Err != nil || !ds[0].OK || !errors.Is(ds[1].Err, ratelimit.ErrInvalidConfig) {
				t.Errorf("LimitMany(good, inline %+v) = %+v, want [granted, ErrInvalidConfig]", tc.cfg, ds)
			}
			wantValue(t, l, "good", "k", 10)
			wantValue(t, l, "good", "x", 10)
			wantValue(t, l, "good", "y", 9)
		})
	}
	t.Run("valid edge configs open", func(t *testing.T) {
		clk := newClock(t0)
		l, err := ratelimit.Open(ratelimit.Options{Now: clk.Now, Limits: map[string]ratelimit.Config{
			"tiny rate":   tb(1e-9, H),
			"1ns period":  tb(1, 1),
			"shards 1":    withShards(tb(1, S), 1),
			"fw no start": fw(1, S, time.Time{}),
		}})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		_ = l.Close()
		l, err = ratelimit.Open(ratelimit.Options{Now: clk.Now})
		if err != nil {
			t.Fatalf("Open with no limits: %v", err)
		}
		_ = l.Close()
	})
}

func TestAcceptanceInlineConfig(t *testing.T) {
	clk := newClock(t0)
	l := open(t, clk, map[string]ratelimit.Config{"named": tb(10, M)})
	inline := tb(3, M)
	r := ratelimit.Request{Name: "inl", Key: "k", Config: &inline}
	for i := 0; i < 3; i++ {
		if st := limit(t, l, r); !st.OK {
			t.Fatalf("inline grant %d denied: %+v", i, st)
		}
	}
	st := limit(t, l, r)
	if st.OK || st.RetryAfter != 20*S {
		t.Errorf("inline {3/min} 4th request = %+v, want denied with RetryAfter 20s", st)
	}
	// inline wins over Options.Limits: capacity 2 rejects count 3 although
	// the named limit holds 10
	small := tb(2, M)
	if _, err := l.Limit(bg, ratelimit.Request{Name: "named", Key: "z", Count: 3, Config: &small}); !errors.Is(err, ratelimit.ErrInvalidCount) {
		t.Errorf("inline capacity 2 over named capacity 10, count 3: err = %v, want ErrInvalidCount", err)
	}
	big := withCap(tb(10, M), 50)
	if st, err := l.Limit(bg, ratelimit.Request{Name: "inl2", Key: "z", Count: 30, Config: &big}); err != nil || !st.OK {
		t.Errorf("inline capacity 50, count 30: %+v, %v; want granted", st, err)
	}
}

func TestAcceptanceUnknownLimit(t *testing.T) {
	clk := newClock(t0)
	l := open(t, clk, map[string]ratelimit.Config{"a": tb(10, M)})
	for _, name := range []string{"b", "", "A", "a "} {
		r := ratelimit.Request{Name: name, Key: "k"}
		if _, err := l.Limit(bg, r); !errors.Is(err, ratelimit.ErrUnknownLimit) {
			t.Errorf("Limit(%q): err = %v, want ErrUnknownLimit", name, err)
		}
		if _, err := l.Check(bg, r); !errors.Is(err, ratelimit.ErrUnknownLimit) {
			t.Errorf("Check(%q): err = %v, want ErrUnknownLimit", name, err)
		}
		if _, err := l.Value(bg, name, "k"); !errors.Is(err, ratelimit.ErrUnknownLimit) {
			t.Errorf("Value(%q): err = %v, want ErrUnknownLimit", name, err)
		}
		if _, err := l.LimitAll(bg, ratelimit.Request{Name: "a", Key: "k"}, r); !errors.Is(err, ratelimit.ErrUnknownLimit) {
			t.Errorf("LimitAll(a, %q): err = %v, want ErrUnknownLimit", name, err)
		}
		ds := l.LimitMany(bg, []ratelimit.Request{r}, nil)
		if len(ds) != 1 || !errors.Is(ds[0].Err, ratelimit.ErrUnknownLimit) {
			t.Errorf("LimitMany(%q) = %+v, want ErrUnknownLimit", name, ds)
		}
	}
	wantValue(t, l, "a", "k", 10)
}

// ---------------------------------------------------------------- check, reset, keys

func TestAcceptanceCheckNeverWrites(t *testing.T) {
	for _, cfg := range []ratelimit.Config{withMaxRes(tb(10, M), 10), withMaxRes(fw(10, M, t0), 10), withShards(tb(40, M), 4)} {
		t.Run(cfg.Kind.String()+fmt.Sprintf("-shards%d", cfg.Shards), func(t *testing.T) {
			clk := newClock(t0)
			l := open(t, clk, map[string]ratelimit.Config{"c": cfg})
			script := []struct {
				at      time.Duration
				count   float64
				reserve bool
			}{
				{0, 4, false}, {0, 7, false}, {0, 12, true}, {5 * S, 1, false}, {5 * S, 8, false},
				{7 * S, 15, true}, {7 * S, 19, true}, {7 * S, 3, false}, {61 * S, 10, false}, {61 * S, 1, false},
			}
			if cfg.Shards > 1 {
				script = script[:3] // sharded Limit is randomized; only compare Check and Value there
			}
			for i, s := range script {
				clk.Set(t0.Add(s.at))
				r := ratelimit.Request{Name: "c", Key: "k", Count: s.count, Reserve: s.reserve}
				before := value(t, l, "c", "k")
				var chk ratelimit.Status
				for j := 0; j < 3; j++ {
					st, err := l.Check(bg, r)
					if err != nil {
						t.Fatalf("step %d Check(%s): %v", i, reqString(r), err)
					}
					if j > 0 && st != chk {
						t.Errorf("step %d: repeated Check gave %+v then %+v", i, chk, st)
					}
					chk = st
				}
				after := value(t, l, "c", "k")
				if after.Value != before.Value || !after.TS.Equal(before.TS) {
					t.Fatalf("step %d: Check(%s) wrote: value %v@%v -> %v@%v", i, reqString(r), before.Value, before.TS.Sub(t0), after.Value, after.TS.Sub(t0))
				}
				if cfg.Shards > 1 {
					continue
				}
				st := limit(t, l, r)
				if st != chk {
					t.Errorf("step %d (%s): Check said %+v, Limit said %+v", i, reqString(r), chk, st)
				}
			}
		})
	}
}

func TestAcceptanceReset(t *testing.T) {
	clk := newClock(t0)
	l := open(t, clk, map[string]ratelimit.Config{
		"tb": tb(10, M), "fw": fw(10, M, time.Time{}), "sh": withShards(tb(40, M), 4), "other": tb(10, M)})
	for _, name := range []string{"tb", "fw", "sh"} {
		t.Run(name, func(t *testing.T) {
			full := value(t, l, name, "").Value
			for _, k := range []string{"", "a", "b"} {
				limit(t, l, ratelimit.Request{Name: name, Key: k, Count: 7})
				limit(t, l, ratelimit.Request{Name: name, Key: k, Count: 5, Reserve: true})
			}
			limit(t, l, ratelimit.Request{Name: "other", Key: "", Count: 3})
			wantValue(t, l, name, "", full-12)
			wantValue(t, l, name, "a", full-12)
			if err := l.Reset(bg, name, ""); err != nil {
				t.Fatalf("Reset global: %v", err)
			}
			wantValue(t, l, name, "", full)
			wantValue(t, l, name, "a", full-12)
			wantValue(t, l, name, "b", full-12)
			if err := l.Reset(bg, name, "a"); err != nil {
				t.Fatalf("Reset a: %v", err)
			}
			wantValue(t, l, name, "a", full)
			wantValue(t, l, name, "b", full-12)
			wantValue(t, l, "other", "", 7)
			// reset of an absent bucket is fine
			if err := l.Reset(bg, name, "never-seen"); err != nil {
				t.Errorf("Reset absent: %v", err)
			}
			// after a reset the bucket is full and usable again
			n := full
			if name == "sh" {
				n = 20 // two shards' worth: the most one request can draw
			}
			if st := limit(t, l, ratelimit.Request{Name: name, Key: "a", Count: n}); !st.OK {
				t.Errorf("full request after reset denied: %+v", st)
			}
			if err := l.Reset(bg, name, "a"); err != nil {
				t.Fatal(err)
			}
			if err := l.Reset(bg, name, "b"); err != nil {
				t.Fatal(err)
			}
			if err := l.Reset(bg, "other", ""); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestAcceptanceGlobalKeyIsDistinct(t *testing.T) {
	clk := newClock(t0)
	l := open(t, clk, map[string]ratelimit.Config{"a": tb(10, M), "b": tb(10, M)})
	limit(t, l, ratelimit.Request{Name: "a", Key: "", Count: 10})
	if st := limit(t, l, ratelimit.Request{Name: "a", Key: ""}); st.OK {
		t.Errorf("global bucket not exhausted")
	}
	for _, k := range []string{"x", " ", "\x00", "a"} {
		if st := limit(t, l, ratelimit.Request{Name: "a", Key: k}); !st.OK {
			t.Errorf("key %q shares the global bucket: %+v", k, st)
		}
	}
	wantValue(t, l, "a", "", 0)
	wantValue(t, l, "b", "", 10)
}

func TestAcceptanceKeys(t *testing.T) {
	big := make([]byte, 4096)
	for i := range big {
		big[i] = byte(i * 7)
	}
	big2 := append([]byte(nil), big...)
	big2[4095] ^= 1
	huge := strings.Repeat("k", 64<<10)
	keys := []string{
		"", "a", "a\x00", "\x00a", "a\x00b", "a\x00c", "\x00", "\x00\x00", "\xff\xfe\x80", "ab",
		string(big), string(big2), string(big[:4095]), huge, "ключ", "\u2028", "a/b", "a:b",
	}
	clk := newClock(t0)
	l := open(t, clk, map[string]ratelimit.Config{"t": tb(100, M), "f": fw(100, M, time.Time{}), "s": withShards(tb(100, M), 4)})
	for _, name := range []string{"t", "f", "s"} {
		t.Run(name, func(t *testing.T) {
			// key i takes i+1 tokens; every key must keep its own count
			for i, k := range keys {
				st, err := l.Limit(bg, ratelimit.Request{Name: name, Key: k, Count: float64(i + 1)})
				if err != nil || !st.OK {
					t.Fatalf("Limit key %s: %+v, %v", shortKey(k), st, err)
				}
			}
			for i, k := range keys {
				wantValue(t, l, name, k, 100-float64(i+1))
			}
			for _, k := range keys {
				if err := l.Reset(bg, name, k); err != nil {
					t.Fatalf("Reset key %s: %v", shortKey(k), err)
				}
				wantValue(t, l, name, k, 100)
			}
		})
	}
	t.Run("name and key do not run together", func(t *testing.T) {
		l, err := ratelimit.Open(ratelimit.Options{Now: clk.Now, Limits: map[string]ratelimit.Config{
			"a": tb(10, M), "ab": tb(10, M), "a\x00": tb(10, M), "a\x00b": tb(10, M), "a:": tb(10, M)}})
		if errors.Is(err, ratelimit.ErrInvalidConfig) {
			t.Skipf("names with NUL bytes rejected: %v", err)
		}
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		pairs := []struct{ name, key string }{
			{"a", "bc"}, {"ab", "c"}, {"a", "\x00b"}, {"a\x00", "b"}, {"a\x00b", ""}, {"a", ":b"}, {"a:", "b"}, {"a", ""}, {"ab", ""},
		}
		for i, p := range pairs {
			limit(t, l, ratelimit.Request{Name: p.name, Key: p.key, Count: float64(i + 1)})
		}
		for i, p := range pairs {
			wantValue(t, l, p.name, p.key, 10-float64(i+1))
		}
	})
}

// ---------------------------------------------------------------- fixed window phase

func TestAcceptanceFixedWindowPhase(t *testing.T) {
	const nKeys = 256
	cfg := fw(1, H, time.Time{})
	limits := map[string]ratelimit.Config{"fw": cfg, "fw2": cfg}
	clk := newClock(t0)
	l := open(t, clk, limits)
	ts := make([]time.Time, nKeys)
	distinct := map[int64]bool{}
	var bins [8]int
	for i := range ts {
		k := fmt.Sprintf("user-%d", i)
		v := wantValue(t, l, "fw", k, 1)
		ts[i] = v.TS
		if v.TS.After(t0) || !t0.Before(v.TS.Add(H)) {
			t.Fatalf("key %s: window start t0%+v does not contain now", k, v.TS.Sub(t0))
		}
		distinct[v.TS.UnixNano()] = true
		bins[int(t0.Sub(v.TS)*8/H)]++
	}
	if len(distinct) < nKeys*9/10 {
		t.Errorf("only %d distinct window phases over %d keys", len(distinct), nKeys)
	}
	for i, n := range bins {
		if n == 0 {
			t.Errorf("no key's window starts in eighth %d of the period: phases are not spread (%v)", i, bins)
		}
	}
	same := 0
	for i := 0; i < nKeys; i++ {
		if value(t, l, "fw2", fmt.Sprintf("user-%d", i)).TS.Equal(ts[i]) {
			same++
		}
	}
	if same > nKeys/10 {
		t.Errorf("%d of %d keys have the same phase under two limit names: the phase ignores the name", same, nKeys)
	}

	t.Run("phase drives behaviour", func(t *testing.T) {
		for i := 0; i < 8; i++ {
			k := fmt.Sprintf("user-%d", i)
			clk.Set(t0)
			if st := limit(t, l, ratelimit.Request{Name: "fw", Key: k}); !st.OK {
				t.Fatalf("first request denied")
			}
			st := limit(t, l, ratelimit.Request{Name: "fw", Key: k})
			if want := ts[i].Add(H).Sub(t0); st.OK || st.RetryAfter != want {
				t.Errorf("key %s: second request = %+v, want denied with RetryAfter %v (next window)", k, st, want)
			}
			clk.Set(ts[i].Add(H - 1))
			if st := limit(t, l, ratelimit.Request{Name: "fw", Key: k}); st.OK || st.RetryAfter != 1 {
				t.Errorf("key %s: 1ns before the window = %+v, want denied with RetryAfter 1ns", k, st)
			}
			clk.Set(ts[i].Add(H))
			if st := limit(t, l, ratelimit.Request{Name: "fw", Key: k}); !st.OK {
				t.Errorf("key %s: at the next window start: denied %+v", k, st)
			}
		}
	})

	t.Run("same after reset", func(t *testing.T) {
		clk.Set(t0.Add(2*H + 17*M))
		for i := 0; i < 32; i++ {
			k := fmt.Sprintf("user-%d", i)
			limit(t, l, ratelimit.Request{Name: "fw", Key: k})
			if err := l.Reset(bg, "fw", k); err != nil {
				t.Fatal(err)
			}
			v := value(t, l, "fw", k)
			if d := v.TS.Sub(ts[i]); d%H != 0 {
				t.Errorf("key %s: after reset the window start moved by %v (not a whole period)", k, d)
			}
		}
	})

	t.Run("same in another limiter at another time", func(t *testing.T) {
		clk2 := newClock(t0.Add(37*M + 123))
		l2 := open(t, clk2, limits)
		for i := 0; i < nKeys; i++ {
			k := fmt.Sprintf("user-%d", i)
			v := value(t, l2, "fw", k)
			if d := v.TS.Sub(ts[i]); d%H != 0 {
				t.Errorf("key %s: second limiter's window start differs by %v (not a whole period)", k, d)
			}
		}
	})
}

// ---------------------------------------------------------------- clock going backwards

func TestAcceptanceClockBackwards(t *testing.T) {
	t.Run("token bucket", func(t *testing.T) {
		clk := newClock(t0)
		l := open(t, clk, map[string]ratelimit.Config{"t": tb(10, M)})
		limit(t, l, ratelimit.Request{Name: "t", Count: 5})
		clk.Set(t0.Add(-30 * S))
		wantValue(t, l, "t", "", 5) // not 0: going back destroys nothing
		clk.Set(t0.Add(-10 * H))
		wantValue(t, l, "t", "", 5)
		clk.Set(t0.Add(-30 * S))
		if st := limit(t, l, ratelimit.Request{Name: "t", Count: 1}); !st.OK {
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
		if st := limit(t, l, ratelimit.Request{Name: "t", Count: 9}); st.OK {
			t.Errorf("granted 9 with 4 tokens: %+v", st)
		}
		clk.Set(t0.Add(12 * S))
		wantValue(t, l, "t", "", 6)
	})
	t.Run("fixed window", func(t *testing.T) {
		clk := newClock(t0)
		l := open(t, clk, map[string]ratelimit.Config{"f": fw(10, M, t0)})
		limit(t, l, ratelimit.Request{Name: "f", Count: 10})
		clk.Set(t0.Add(60 * S))
		limit(t, l, ratelimit.Request{Name: "f", Count: 1})
		wantValue(t, l, "f", "", 9)
		clk.Set(t0.Add(30 * S))
		v := wantValue(t, l, "f", "", 9)
		if !v.TS.Equal(t0.Add(60 * S)) {
			t.Errorf("TS = t0%+v, want t0+60s (never moves back)", v.TS.Sub(t0))
		}
		clk.Set(t0.Add(-5 * M))
		wantValue(t, l, "f", "", 9)
		limit(t, l, ratelimit.Request{Name: "f", Count: 1})
		wantValue(t, l, "f", "", 8)
		clk.Set(t0.Add(119 * S))
		wantValue(t, l, "f", "", 8) // going back did not start a new window
		clk.Set(t0.Add(120 * S))
		wantValue(t, l, "f", "", 10)
	})
	t.Run("fresh bucket while behind", func(t *testing.T) {
		clk := newClock(t0)
		l := open(t, clk, map[string]ratelimit.Config{"t": tb(10, M)})
		clk.Set(t0.Add(-H))
		wantValue(t, l, "t", "k", 10)
		limit(t, l, ratelimit.Request{Name: "t", Key: "k", Count: 10})
		clk.Set(t0.Add(-H + 6*S))
		wantValue(t, l, "t", "k", 1)
	})
}

// ---------------------------------------------------------------- huge waits

func TestAcceptanceHugeRetryAfterNeverNegative(t *testing.T) {
	clk := newClock(t0)
	l := open(t, clk, map[string]ratelimit.Config{
		"slow":   tb(1e-9, H),
		"slowfw": fw(1e-9, H, t0),
		"res":    tb(1, H),
		"resfw":  fw(1, H, t0),
	})
	for _, name := range []string{"slow", "slowfw"} {
		limit(t, l, ratelimit.Request{Name: name, Count: 1e-9})
		st := limit(t, l, ratelimit.Request{Name: name, Count: 1e-9})
		// the true wait is one hour (1e-9 tokens at 1e-9/h); at least it must
		// be positive and not early
		if st.OK || st.RetryAfter < H {
			t.Errorf("%s: second request = %+v, want denied with RetryAfter >= 1h", name, st)
		}
	}
	for _, name := range []string{"res", "resfw"} {
		st := limit(t, l, ratelimit.Request{Name: name, Count: 1e12, Reserve: true})
		// the wait is ~1e12 hours, beyond time.Duration: it must saturate
		// (at anything over a century), not wrap
		if !st.OK || st.RetryAfter < 100*365*24*H {
			t.Errorf("%s: reserving 1e12 tokens at 1/h = %+v, want granted with a huge (saturated) RetryAfter", name, st)
		}
		st = limit(t, l, ratelimit.Request{Name: name, Count: 1})
		if st.OK || st.RetryAfter < 100*365*24*H {
			t.Errorf("%s: after a 1e12 debt, request = %+v, want denied with a huge RetryAfter", name, st)
		}
	}
}

// ---------------------------------------------------------------- sharding

func TestAcceptanceSharding(t *testing.T) {
	sh4 := withShards(tb(40, M), 4)
	sh2 := withShards(tb(20, M), 2)
	fw4 := withShards(fw(40, M, t0), 4)
	t.Run("fresh value sums shards", func(t *testing.T) {
		clk := newClock(t0)
		l := open(t, clk, map[string]ratelimit.Config{"s": sh4, "f": fw4, "c": withCap(withShards(tb(10, M), 4), 40)})
		for _, name := range []string{"s", "f", "c"} {
			for _, k := range []string{"", "k"} {
				wantValue(t, l, name, k, 40)
			}
		}
	})
	t.Run("count above two shards is invalid", func(t *testing.T) {
		clk := newClock(t0)
		l := open(t, clk, map[string]ratelimit.Config{"s": sh4, "s2": sh2, "f": fw4})
		for _, r := range []ratelimit.Request{{Name: "s", Count: 21}, {Name: "s2", Count: 20.5}, {Name: "f", Count: 21}} {
			if _, err := l.Limit(bg, r); !errors.Is(err, ratelimit.ErrInvalidCount) {
				t.Errorf("Limit(%s): err = %v, want ErrInvalidCount", reqString(r), err)
			}
			if _, err := l.Check(bg, r); !errors.Is(err, ratelimit.ErrInvalidCount) {
				t.Errorf("Check(%s): err = %v, want ErrInvalidCount", reqString(r), err)
			}
		}
		wantValue(t, l, "s", "", 40)
		wantValue(t, l, "s2", "", 20)
		wantValue(t, l, "f", "", 40)
	})
	t.Run("count needing two shards succeeds fresh", func(t *testing.T) {
		for _, c := range []struct {
			cfg   ratelimit.Config
			count float64
		}{{sh4, 15}, {sh4, 20}, {sh4, 10.5}, {sh2, 11}, {sh2, 15}, {sh2, 20}, {fw4, 15}, {fw4, 20}} {
			for trial := 0; trial < 20; trial++ { // shard choice is random: try several times
				clk := newClock(t0)
				l := open(t, clk, map[string]ratelimit.Config{"s": c.cfg})
				if st, err := l.Check(bg, ratelimit.Request{Name: "s", Count: c.count}); err != nil || !st.OK {
					t.Fatalf("shards %d: Check %v on fresh = %+v, %v; want OK", c.cfg.Shards, c.count, st, err)
				}
				st := limit(t, l, ratelimit.Request{Name: "s", Count: c.count})
				if !st.OK || st.RetryAfter != 0 {
					t.Fatalf("shards %d capacity %v: count %v on fresh = %+v; want granted", c.cfg.Shards, c.cfg.Rate, c.count, st)
				}
				wantValue(t, l, "s", "", c.cfg.Rate-c.count)
				_ = l.Close()
			}
		}
	})
	t.Run("two shards split evenly", func(t *testing.T) {
		clk := newClock(t0)
		l := open(t, clk, map[string]ratelimit.Config{"s": sh2})
		limit(t, l, ratelimit.Request{Name: "s", Count: 15}) // 10+10 -> 2.5+2.5
		if st := limit(t, l, ratelimit.Request{Name: "s", Count: 5}); !st.OK {
			t.Errorf("count 5 with shards at 2.5+2.5 denied: %+v", st)
		}
		wantValue(t, l, "s", "", 0)
		st := limit(t, l, ratelimit.Request{Name: "s", Count: 1})
		// each half needs 0.5 token at 10/min per shard: 3s
		if st.OK || st.RetryAfter != 3*S {
			t.Errorf("count 1 on empty shards = %+v, want denied with RetryAfter 3s", st)
		}
		checkNeverEarly(t, clk, l, "s", "", t0, 1)
	})
	t.Run("sharded reservations", func(t *testing.T) {
		clk := newClock(t0)
		l := open(t, clk, map[string]ratelimit.Config{"s": withMaxRes(sh2, 10), "s4": withMaxRes(sh4, 20)})
		if _, err := l.Limit(bg, ratelimit.Request{Name: "s", Count: 30.5, Reserve: true}); !errors.Is(err, ratelimit.ErrInvalidCount) {
			t.Errorf("reserve 30.5 over 2 shards of (10 + 5 reserved): err = %v, want ErrInvalidCount", err)
		}
		if _, err := l.Limit(bg, ratelimit.Request{Name: "s4", Count: 31, Reserve: true}); !errors.Is(err, ratelimit.ErrInvalidCount) {
			t.Errorf("reserve 31 over two of 4 shards of (10 + 5 reserved): err = %v, want ErrInvalidCount", err)
		}
		st := limit(t, l, ratelimit.Request{Name: "s", Count: 30, Reserve: true})
		// each shard: 10 - 15 = -5 at 10/min: 30s
		if !st.OK || st.RetryAfter != 30*S {
			t.Errorf("reserve 30 over 2 shards = %+v, want granted with RetryAfter 30s", st)
		}
		wantValue(t, l, "s", "", -10)
		st = limit(t, l, ratelimit.Request{Name: "s4", Count: 30, Reserve: true})
		if !st.OK || st.RetryAfter != 30*S {
			t.Errorf("reserve 30 over two of 4 shards = %+v, want granted with RetryAfter 30s", st)
		}
		wantValue(t, l, "s4", "", 10)
	})
	t.Run("frozen clock never over-admits", func(t *testing.T) {
		for _, c := range []struct {
			name string
			cfg  ratelimit.Config
		}{{"tb4", sh4}, {"tb2", sh2}, {"fw4", fw4}, {"tb16", withCap(withShards(tb(40, M), 16), 80)}} {
			t.Run(c.name, func(t *testing.T) {
				capacity := c.cfg.Capacity
				if capacity == 0 {
					capacity = c.cfg.Rate
				}
				clk := newClock(t0)
				l := open(t, clk, map[string]ratelimit.Config{"s": c.cfg})
				rng := rand.New(rand.NewPCG(7, 7))
				counts := []float64{1, 2, 3, 5, 7, 0.5}
				granted := 0.0
				for i := 0; i < 500; i++ {
					n := counts[rng.IntN(len(counts))]
					st := limit(t, l, ratelimit.Request{Name: "s", Count: n})
					if st.OK {
						granted += n
					} else if st.RetryAfter <= 0 {
						t.Fatalf("denial with RetryAfter %v", st.RetryAfter)
					}
				}
				// then half tokens until no two shards together hold half a token
				for i := 0; i < 20000; i++ {
					if st := limit(t, l, ratelimit.Request{Name: "s", Count: 0.5}); st.OK {
						granted += 0.5
					}
				}
				if granted > capacity {
					t.Errorf("granted %v tokens with a frozen clock, capacity %v", granted, capacity)
				}
				v := value(t, l, "s", "")
				if v.Value != capacity-granted {
					t.Errorf("Value = %v, want capacity - granted = %v", v.Value, capacity-granted)
				}
				// if every pair of shards holds < 0.5 together, at most
				// 0.25 per shard is left
				if stranded := capacity - granted; stranded >= 0.25*float64(c.cfg.Shards) {
					t.Errorf("granted %v of %v: %v tokens left that half-token requests could take", granted, capacity, stranded)
				}
			})
		}
	})
	t.Run("reset deletes every shard", func(t *testing.T) {
		clk := newClock(t0)
		l := open(t, clk, map[string]ratelimit.Config{"s": sh4})
		for i := 0; i < 2000; i++ {
			limit(t, l, ratelimit.Request{Name: "s", Key: "k", Count: 1})
		}
		wantValue(t, l, "s", "k", 0)
		if err := l.Reset(bg, "s", "k"); err != nil {
			t.Fatal(err)
		}
		wantValue(t, l, "s", "k", 40)
		clk.Advance(S)
		wantValue(t, l, "s", "k", 40)
	})
	t.Run("refill is per shard", func(t *testing.T) {
		clk := newClock(t0)
		l := open(t, clk, map[string]ratelimit.Config{"s": sh4})
		for i := 0; i < 2000; i++ {
			limit(t, l, ratelimit.Request{Name: "s", Count: 1})
		}
		wantValue(t, l, "s", "", 0)
		clk.Advance(30 * S)
		wantValue(t, l, "s", "", 20)
		clk.Advance(H)
		wantValue(t, l, "s", "", 40)
	})
}

// ---------------------------------------------------------------- LimitAll

func limitAllLimits() map[string]ratelimit.Config {
	return map[string]ratelimit.Config{
		"a": tb(10, M),
		"b": tb(5, M),
		"w": fw(4, M, t0),
		"s": withShards(tb(40, M), 4),
	}
}

func TestAcceptanceLimitAll(t *testing.T) {
	t.Run("all or none", func(t *testing.T) {
		clk := newClock(t0)
		l := open(t, clk, limitAllLimits())
		limit(t, l, ratelimit.Request{Name: "b", Key: "k", Count: 5})
		st, err := l.LimitAll(bg,
			ratelimit.Request{Name: "a", Key: "k", Count: 3},
			ratelimit.Request{Name: "w", Key: "k", Count: 2},
			ratelimit.Request{Name: "s", Key: "k", Count: 15},
			ratelimit.Request{Name: "b", Key: "k", Count: 1})
		if err != nil {
			t.Fatal(err)
		}
		if st.OK || st.RetryAfter != 12*S || st.Limit != "b" {
			t.Errorf("LimitAll with b exhausted = %+v, want denied, RetryAfter 12s, Limit b", st)
		}
		wantValue(t, l, "a", "k", 10)
		wantValue(t, l, "w", "k", 4)
		wantValue(t, l, "s", "k", 40)
		wantValue(t, l, "b", "k", 0)
		// order does not matter
		st, _ = l.LimitAll(bg,
			ratelimit.Request{Name: "b", Key: "k", Count: 1},
			ratelimit.Request{Name: "a", Key: "k", Count: 3})
		if st.OK || st.RetryAfter != 12*S || st.Limit != "b" {
			t.Errorf("LimitAll(b, a) = %+v, want denied, RetryAfter 12s, Limit b", st)
		}
		wantValue(t, l, "a", "k", 10)
	})
	t.Run("granted takes from every member", func(t *testing.T) {
		clk := newClock(t0)
		l := open(t, clk, limitAllLimits())
		st, err := l.LimitAll(bg,
			ratelimit.Request{Name: "a", Key: "y", Count: 3},
			ratelimit.Request{Name: "b", Key: "y", Count: 2},
			ratelimit.Request{Name: "w", Key: "y"},
			ratelimit.Request{Name: "s", Key: "y", Count: 15},
			ratelimit.Request{Name: "a", Key: "", Count: 4})
		if err != nil || !st.OK || st.RetryAfter != 0 {
			t.Fatalf("LimitAll = %+v, %v; want granted", st, err)
		}
		wantValue(t, l, "a", "y", 7)
		wantValue(t, l, "b", "y", 3)
		wantValue(t, l, "w", "y", 3)
		wantValue(t, l, "s", "y", 25)
		wantValue(t, l, "a", "", 6)
	})
	t.Run("RetryAfter is the latest", func(t *testing.T) {
		clk := newClock(t0)
		l := open(t, clk, limitAllLimits())
		limit(t, l, ratelimit.Request{Name: "a", Key: "x", Count: 10}) // 1 token in 6s
		limit(t, l, ratelimit.Request{Name: "b", Key: "x", Count: 5})  // 1 token in 12s
		limit(t, l, ratelimit.Request{Name: "w", Key: "x", Count: 4})  // next window at t0+60s
		clk.Set(t0.Add(6 * S))                                         // a holds 1, b holds 0.5, w 0 until t0+60s
		aHalf := ratelimit.Request{Name: "a", Key: "x", Count: 0.5}    // granted alone
		a3 := ratelimit.Request{Name: "a", Key: "x", Count: 3}         // 2 short: 12s
		b := ratelimit.Request{Name: "b", Key: "x", Count: 1}          // 0.5 short: 6s
		w := ratelimit.Request{Name: "w", Key: "x", Count: 1}          // next window: 54s
		cases := []struct {
			name  string
			rs    []ratelimit.Request
			retry time.Duration
			lim   []string
		}{
			{"a3 b", []ratelimit.Request{a3, b}, 12 * S, []string{"a", "b"}},
			{"b a3", []ratelimit.Request{b, a3}, 12 * S, []string{"a", "b"}},
			{"a3 w", []ratelimit.Request{a3, w}, 54 * S, []string{"a", "w"}},
			{"w b a3", []ratelimit.Request{w, b, a3}, 54 * S, []string{"w", "b", "a"}},
			{"b w", []ratelimit.Request{b, w}, 54 * S, []string{"w", "b"}},
			{"aHalf b", []ratelimit.Request{aHalf, b}, 6 * S, []string{"b"}},
			{"b aHalf", []ratelimit.Request{b, aHalf}, 6 * S, []string{"b"}},
		}
		for _, c := range cases {
			st, err := l.LimitAll(bg, c.rs...)
			if err != nil {
				t.Fatal(err)
			}
			matched := false
			for _, n := range c.lim {
				matched = matched || st.Limit == n
			}
			if st.OK || st.RetryAfter != c.retry || !matched {
				t.Errorf("%s: LimitAll = %+v, want denied with RetryAfter %v by one of %v", c.name, st, c.retry, c.lim)
			}
		}
		wantValue(t, l, "a", "x", 1)
		wantValue(t, l, "b", "x", 0.5)
		wantValue(t, l, "w", "x", 0)
	})
	t.Run("reservations", func(t *testing.T) {
		clk := newClock(t0)
		l := open(t, clk, limitAllLimits())
		st, err := l.LimitAll(bg,
			ratelimit.Request{Name: "a", Key: "z", Count: 15, Reserve: true},
			ratelimit.Request{Name: "b", Key: "z", Count: 6, Reserve: true},
			ratelimit.Request{Name: "w", Key: "z", Count: 1, Reserve: true})
		if err != nil || !st.OK || st.RetryAfter != 30*S {
			t.Errorf("LimitAll reservations = %+v, %v; want granted with RetryAfter 30s", st, err)
		}
		wantValue(t, l, "a", "z", -5)
		wantValue(t, l, "b", "z", -1)
		wantValue(t, l, "w", "z", 3)
	})
	t.Run("a bad member takes nothing", func(t *testing.T) {
		clk := newClock(t0)
		l := open(t, clk, limitAllLimits())
		bad := tb(-1, M)
		good := []ratelimit.Request{
			{Name: "a", Key: "k", Count: 3}, {Name: "s", Key: "k", Count: 15}, {Name: "w", Key: "k", Count: 1},
		}
		cases := []struct {
			name string
			r    ratelimit.Request
			want error
		}{
			{"unknown name", ratelimit.Request{Name: "nope", Key: "k"}, ratelimit.ErrUnknownLimit},
			{"NaN count", ratelimit.Request{Name: "b", Key: "k", Count: math.NaN()}, ratelimit.ErrInvalidCount},
			{"negative count", ratelimit.Request{Name: "b", Key: "k", Count: -2}, ratelimit.ErrInvalidCount},
			{"count above capacity", ratelimit.Request{Name: "b", Key: "k", Count: 6}, ratelimit.ErrInvalidCount},
			{"count above two shards", ratelimit.Request{Name: "s", Key: "other", Count: 21}, ratelimit.ErrInvalidCount},
			{"bad inline config", ratelimit.Request{Name: "inl", Key: "k", Config: &bad}, ratelimit.ErrInvalidConfig},
		}
		for _, c := range cases {
			for pos := 0; pos <= len(good); pos++ {
				rs := append(append(append([]ratelimit.Request(nil), good[:pos]...), c.r), good[pos:]...)
				_, err := l.LimitAll(bg, rs...)
				if !errors.Is(err, c.want) {
					t.Errorf("%s at position %d: err = %v, want %v", c.name, pos, err, c.want)
				}
			}
		}
		wantValue(t, l, "a", "k", 10)
		wantValue(t, l, "s", "k", 40)
		wantValue(t, l, "w", "k", 4)
		wantValue(t, l, "b", "k", 5)
	})
	t.Run("same bucket twice is not over-admitted", func(t *testing.T) {
		clk := newClock(t0)
		l := open(t, clk, limitAllLimits())
		st, err := l.LimitAll(bg,
			ratelimit.Request{Name: "a", Key: "d", Count: 6},
			ratelimit.Request{Name: "a", Key: "d", Count: 6})
		if err == nil && st.OK {
			t.Errorf("LimitAll(a/d 6, a/d 6) on capacity 10 granted: %+v", st)
		}
		v := value(t, l, "a", "d").Value
		if v != 10 {
			t.Errorf("after a refused double request, Value = %v, want 10", v)
		}
		st, err = l.LimitAll(bg,
			ratelimit.Request{Name: "a", Key: "e", Count: 4},
			ratelimit.Request{Name: "a", Key: "e", Count: 4})
		v = value(t, l, "a", "e").Value
		if err == nil && st.OK && v != 2 {
			t.Errorf("LimitAll(a/e 4, a/e 4) granted but Value = %v, want 2", v)
		}
		if (err != nil || !st.OK) && v != 10 {
			t.Errorf("LimitAll(a/e 4, a/e 4) refused (%+v, %v) but Value = %v, want 10", st, err, v)
		}
	})
	t.Run("same sharded limit twice keeps exact accounting", func(t *testing.T) {
		clk := newClock(t0)
		l := open(t, clk, limitAllLimits())
		for i := 0; i < 20; i++ {
			key := fmt.Sprintf("ss%d", i)
			st, err := l.LimitAll(bg,
				ratelimit.Request{Name: "s", Key: key, Count: 8},
				ratelimit.Request{Name: "s", Key: key, Count: 8})
			v := value(t, l, "s", key).Value
			if err == nil && st.OK && v != 24 {
				t.Errorf("%s: LimitAll(s 8, s 8) granted but Value = %v, want 24", key, v)
			}
			if (err != nil || !st.OK) && v != 40 {
				t.Errorf("%s: LimitAll(s 8, s 8) refused (%+v, %v) but Value = %v, want 40", key, st, err, v)
			}
		}
	})
	t.Run("single member equals Limit", func(t *testing.T) {
		clk := newClock(t0)
		l := open(t, clk, limitAllLimits())
		for i := 0; i < 12; i++ {
			r := ratelimit.Request{Name: "a", Key: "one", Count: 1}
			chk, _ := l.Check(bg, r)
			st, err := l.LimitAll(bg, r)
			if err != nil || st != chk {
				t.Errorf("request %d: LimitAll(one) = %+v, %v; Check said %+v", i, st, err, chk)
			}
		}
		wantValue(t, l, "a", "one", 0)
	})
}

// ---------------------------------------------------------------- LimitMany

func TestAcceptanceLimitMany(t *testing.T) {
	clk := newClock(t0)
	l := open(t, clk, limitAllLimits())
	limit(t, l, ratelimit.Request{Name: "b", Key: "k", Count: 5})
	rs := []ratelimit.Request{
		{Name: "a", Key: "k", Count: 3},
		{Name: "b", Key: "k", Count: 1},
		{Name: "nope", Key: "k"},
		{Name: "a", Key: "k", Count: 11},
		{Name: "w", Key: "k", Count: 2},
		{Name: "s", Key: "k", Count: 15},
		{Name: "a", Key: "k", Count: math.NaN()},
	}
	out := make([]ratelimit.Decision, 3, 16)
	for i := range out {
		out[i] = ratelimit.Decision{Status: ratelimit.Status{OK: true, Limit: "junk"}, Err: errors.New("junk")}
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
	check(2, false, 0, ratelimit.ErrUnknownLimit)
	check(3, false, 0, ratelimit.ErrInvalidCount)
	check(4, true, 0, nil)
	check(5, true, 0, nil)
	check(6, false, 0, ratelimit.ErrInvalidCount)
	wantValue(t, l, "a", "k", 7)
	wantValue(t, l, "b", "k", 0)
	wantValue(t, l, "w", "k", 2)
	wantValue(t, l, "s", "k", 25)

	t.Run("nil out and empty input", func(t *testing.T) {
		if ds := l.LimitMany(bg, nil, nil); len(ds) != 0 {
			t.Errorf("LimitMany(nil) = %+v", ds)
		}
		ds := l.LimitMany(bg, []ratelimit.Request{{Name: "a", Key: "n"}}, nil)
		if len(ds) != 1 || !ds[0].OK || ds[0].Err != nil {
			t.Errorf("LimitMany one = %+v", ds)
		}
	})
	t.Run("same bucket twice: exactly one fits", func(t *testing.T) {
		ds := l.LimitMany(bg, []ratelimit.Request{{Name: "a", Key: "dup", Count: 6}, {Name: "a", Key: "dup", Count: 6}}, nil)
		if len(ds) != 2 || ds[0].Err != nil || ds[1].Err != nil || ds[0].OK == ds[1].OK {
			t.Errorf("two requests of 6 on capacity 10 = %+v, want exactly one granted", ds)
		}
		wantValue(t, l, "a", "dup", 4)
	})
}

// ---------------------------------------------------------------- context

func TestAcceptanceCanceledContext(t *testing.T) {
	clk := newClock(t0)
	l := open(t, clk, limitAllLimits())
	limit(t, l, ratelimit.Request{Name: "a", Key: "k", Count: 5})
	limit(t, l, ratelimit.Request{Name: "s", Key: "k", Count: 5})
	canceled, cancel := context.WithCancel(bg)
	cancel()
	expired, cancel2 := context.WithDeadline(bg, time.Now().Add(-time.Hour))
	defer cancel2()
	for _, c := range []struct {
		name string
		ctx  context.Context
		want error
	}{{"canceled", canceled, context.Canceled}, {"deadline", expired, context.DeadlineExceeded}} {
		t.Run(c.name, func(t *testing.T) {
			ctx := c.ctx
			r := ratelimit.Request{Name: "a", Key: "k", Count: 1}
			if _, err := l.Limit(ctx, r); !errors.Is(err, c.want) {
				t.Errorf("Limit: err = %v, want %v", err, c.want)
			}
			if _, err := l.Limit(ctx, ratelimit.Request{Name: "s", Key: "k", Count: 12}); !errors.Is(err, c.want) {
				t.Errorf("Limit sharded: err = %v, want %v", err, c.want)
			}
			if _, err := l.Limit(ctx, ratelimit.Request{Name: "a", Key: "k", Count: 20, Reserve: true}); !errors.Is(err, c.want) {
				t.Errorf("Limit reserve: err = %v, want %v", err, c.want)
			}
			if _, err := l.Check(ctx, r); !errors.Is(err, c.want) {
				t.Errorf("Check: err = %v, want %v", err, c.want)
			}
			if _, err := l.LimitAll(ctx, r, ratelimit.Request{Name: "b", Key: "k"}, ratelimit.Request{Name: "s", Key: "k"}); !errors.Is(err, c.want) {
				t.Errorf("LimitAll: err = %v, want %v", err, c.want)
			}
			ds := l.LimitMany(ctx, []ratelimit.Request{r, {Name: "b", Key: "k"}}, nil)
			if len(ds) != 2 || !errors.Is(ds[0].Err, c.want) || !errors.Is(ds[1].Err, c.want) {
				t.Errorf("LimitMany = %+v, want every decision %v", ds, c.want)
			}
			if err := l.Reset(ctx, "a", "k"); !errors.Is(err, c.want) {
				t.Errorf("Reset: err = %v, want %v", err, c.want)
			}
			if _, err := l.Value(ctx, "a", "k"); !errors.Is(err, c.want) {
				t.Errorf("Value: err = %v, want %v", err, c.want)
			}
			wantValue(t, l, "a", "k", 5) // neither consumed nor reset
			wantValue(t, l, "s", "k", 35)
			wantValue(t, l, "b", "k", 5)
		})
	}
}

// ---------------------------------------------------------------- close

func TestAcceptanceClose(t *testing.T) {
	clk := newClock(t0)
	l, err := ratelimit.Open(ratelimit.Options{Limits: limitAllLimits(), Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	limit(t, l, ratelimit.Request{Name: "a", Key: "k"})
	if err := l.Close(); err != nil {
		t.Fatalf("first Close: %v", err)
	}
	for i := 0; i < 3; i++ {
		if err := l.Close(); !errors.Is(err, ratelimit.ErrClosed) {
			t.Errorf("Close #%d: err = %v, want ErrClosed", i+2, err)
		}
	}
	r := ratelimit.Request{Name: "a", Key: "k"}
	if _, err := l.Limit(bg, r); !errors.Is(err, ratelimit.ErrClosed) {
		t.Errorf("Limit after Close: %v", err)
	}
	if _, err := l.Check(bg, r); !errors.Is(err, ratelimit.ErrClosed) {
		t.Errorf("Check after Close: %v", err)
	}
	if _, err := l.LimitAll(bg, r, ratelimit.Request{Name: "b", Key: "k"}); !errors.Is(err, ratelimit.ErrClosed) {
		t.Errorf("LimitAll after Close: %v", err)
	}
	if err := l.Reset(bg, "a", "k"); !errors.Is(err, ratelimit.ErrClosed) {
		t.Errorf("Reset after Close: %v", err)
	}
	if _, err := l.Value(bg, "a", "k"); !errors.Is(err, ratelimit.ErrClosed) {
		t.Errorf("Value after Close: %v", err)
	}
	ds := l.LimitMany(bg, []ratelimit.Request{r, r}, nil)
	if len(ds) != 2 || !errors.Is(ds[0].Err, ratelimit.ErrClosed) || !errors.Is(ds[1].Err, ratelimit.ErrClosed) {
		t.Errorf("LimitMany after Close = %+v", ds)
	}
	// even bad input reports closed or its own error, never a grant
	if st, err := l.Limit(bg, ratelimit.Request{Name: "nope"}); err == nil || st.OK {
		t.Errorf("Limit unknown after Close = %+v, %v", st, err)
	}
}

func TestAcceptanceCloseWhileBusy(t *testing.T) {
	clk := newClock(t0)
	l, err := ratelimit.Open(ratelimit.Options{Limits: map[string]ratelimit.Config{"a": tb(1e6, M), "s": withShards(tb(1e6, M), 4)}, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	var ops atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			closed := false
			for i := 0; i < 100000; i++ {
				var err error
				var st ratelimit.Status
				switch i % 3 {
				case 0:
					st, err = l.Limit(bg, ratelimit.Request{Name: "a", Key: fmt.Sprint(g % 4)})
				case 1:
					st, err = l.LimitAll(bg, ratelimit.Request{Name: "a", Key: "x"}, ratelimit.Request{Name: "s", Key: fmt.Sprint(i % 5)})
				default:
					ds := l.LimitMany(bg, []ratelimit.Request{{Name: "s", Key: "y"}}, nil)
					st, err = ds[0].Status, ds[0].Err
				}
				ops.Add(1)
				if err != nil {
					if !errors.Is(err, ratelimit.ErrClosed) {
						t.Errorf("unexpected error %v", err)
						return
					}
					closed = true
					if st.OK {
						t.Errorf("OK with ErrClosed")
					}
				} else if closed {
					t.Errorf("a call succeeded after an earlier call saw ErrClosed")
					return
				}
				if closed && i > 0 && i%50 == 0 {
					return
				}
			}
		}(g)
	}
	for ops.Load() < 2000 {
		runtime.Gosched()
	}
	if err := l.Close(); err != nil {
		t.Errorf("Close while busy: %v", err)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("callers still blocked 60s after Close")
	}
}

// ---------------------------------------------------------------- concurrency

type bucketRef struct {
	name, key string
}

func TestAcceptanceConcurrentExactAccounting(t *testing.T) {
	limits := map[string]ratelimit.Config{
		"tb":  withCap(tb(10, M), 600),
		"fw":  withCap(fw(10, M, t0), 400),
		"sh":  withCap(withShards(tb(10, M), 4), 800),
		"sh2": withCap(withShards(fw(10, M, time.Time{}), 2), 300),
		"rs":  withMaxRes(withCap(tb(10, M), 200), 150),
	}
	buckets := []bucketRef{
		{"tb", ""}, {"tb", "k1"}, {"fw", ""}, {"fw", "k1"}, {"sh", ""}, {"sh", "k1"}, {"sh2", "k2"}, {"rs", ""},
	}
	capOf := func(name string) float64 { return limits[name].Capacity }
	clk := newClock(t0)
	l := openOpts(t, ratelimit.Options{Limits: limits, Now: clk.Now, Partitions: 4})

	const G = 64
	const opsPer = 300
	grants := make([][]float64, G) // per goroutine, per bucket
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var readerErr atomic.Value
	// a reader that asserts no bucket is ever over-admitted while running
	var rwg sync.WaitGroup
	rwg.Add(1)
	go func() {
		defer rwg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, b := range buckets {
				v, err := l.Value(bg, b.name, b.key)
				if err != nil {
					readerErr.Store(fmt.Sprintf("Value(%s/%s): %v", b.name, b.key, err))
					return
				}
				floor := -limits[b.name].MaxReserved
				if v.Value < floor {
					readerErr.Store(fmt.Sprintf("Value(%s/%s) = %v below %v: over-admitted", b.name, b.key, v.Value, floor))
					return
				}
				if _, err := l.Check(bg, ratelimit.Request{Name: b.name, Key: b.key, Count: 1}); err != nil {
					readerErr.Store(fmt.Sprintf("Check: %v", err))
					return
				}
			}
		}
	}()
	for g := 0; g < G; g++ {
		grants[g] = make([]float64, len(buckets))
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 99))
			mine := grants[g]
			pick := func() (int, ratelimit.Request) {
				i := rng.IntN(len(buckets))
				b := buckets[i]
				r := ratelimit.Request{Name: b.name, Key: b.key, Count: float64(1 + rng.IntN(4))}
				if b.name == "rs" && rng.IntN(2) == 0 {
					r.Reserve = true
				}
				return i, r
			}
			var out []ratelimit.Decision
			for op := 0; op < opsPer; op++ {
				switch rng.IntN(3) {
				case 0:
					i, r := pick()
					st, err := l.Limit(bg, r)
					if err != nil {
						t.Errorf("Limit(%s): %v", reqString(r), err)
						return
					}
					if st.OK {
						mine[i] += r.Count
					}
				case 1:
					n := 2 + rng.IntN(3)
					idx := make([]int, 0, n)
					rs := make([]ratelimit.Request, 0, n)
					seen := map[int]bool{}
					for len(rs) < n {
						i, r := pick()
						if seen[i] {
							continue
						}
						seen[i] = true
						idx = append(idx, i)
						rs = append(rs, r)
					}
					st, err := l.LimitAll(bg, rs...)
					if err != nil {
						t.Errorf("LimitAll: %v", err)
						return
					}
					if st.OK {
						for j, i := range idx {
							mine[i] += rs[j].Count
						}
					}
				default:
					n := 1 + rng.IntN(4)
					idx := make([]int, n)
					rs := make([]ratelimit.Request, n)
					for j := range rs {
						idx[j], rs[j] = pick()
					}
					out = l.LimitMany(bg, rs, out)
					if len(out) != n {
						t.Errorf("LimitMany returned %d for %d", len(out), n)
						return
					}
					for j, d := range out {
						if d.Err != nil {
							t.Errorf("LimitMany: %v", d.Err)
							return
						}
						if d.OK {
							mine[idx[j]] += rs[j].Count
						}
					}
				}
			}
		}(g)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(120 * time.Second):
		t.Fatal("concurrent Limit/LimitAll/LimitMany did not finish in 120s: deadlock?")
	}
	close(stop)
	rwg.Wait()
	if s, ok := readerErr.Load().(string); ok {
		t.Error(s)
	}
	for i, b := range buckets {
		sum := 0.0
		for g := 0; g < G; g++ {
			sum += grants[g][i]
		}
		bound := capOf(b.name) + limits[b.name].MaxReserved
		if sum > bound {
			t.Errorf("%s/%q: granted %v, bound %v: over-admitted", b.name, b.key, sum, bound)
		}
		v := value(t, l, b.name, b.key)
		if v.Value != capOf(b.name)-sum {
			t.Errorf("%s/%q: Value = %v, want capacity %v - acknowledged grants %v = %v",
				b.name, b.key, v.Value, capOf(b.name), sum, capOf(b.name)-sum)
		}
		if sum == 0 {
			t.Errorf("%s/%q: nothing granted at all", b.name, b.key)
		}
	}
}

// Requests in opposite orders over many partitions must not deadlock and
// must keep exact accounting.
func TestAcceptanceLimitAllNoDeadlock(t *testing.T) {
	limits := map[string]ratelimit.Config{}
	var names []string
	for i := 0; i < 8; i++ {
		n := fmt.Sprintf("l%d", i)
		names = append(names, n)
		limits[n] = withCap(tb(1, H), 1e6)
	}
	clk := newClock(t0)
	l := openOpts(t, ratelimit.Options{Limits: limits, Now: clk.Now, Partitions: 8})
	const G = 32
	var wg sync.WaitGroup
	var granted [8]atomic.Int64
	for g := 0; g < G; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 3))
			for op := 0; op < 400; op++ {
				perm := rng.Perm(8)[:2+rng.IntN(6)]
				rs := make([]ratelimit.Request, len(perm))
				for j, p := range perm {
					rs[j] = ratelimit.Request{Name: names[p], Key: "hot"}
				}
				st, err := l.LimitAll(bg, rs...)
				if err != nil || !st.OK {
					t.Errorf("LimitAll = %+v, %v", st, err)
					return
				}
				for _, p := range perm {
					granted[p].Add(1)
				}
			}
		}(g)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(120 * time.Second):
		t.Fatal("LimitAll in opposite orders did not finish in 120s: deadlock")
	}
	for i, n := range names {
		wantValue(t, l, n, "hot", 1e6-float64(granted[i].Load()))
	}
}

// A canceled caller must never block the limiter for the others.
func TestAcceptanceCancelUnderLoad(t *testing.T) {
	clk := newClock(t0)
	l := open(t, clk, map[string]ratelimit.Config{"a": withCap(tb(1, H), 1e9), "s": withCap(withShards(tb(1, H), 4), 1e9)})
	var wg sync.WaitGroup
	var grantedA, grantedS atomic.Int64
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 300; i++ {
				ctx, cancel := context.WithCancel(bg)
				if i%2 == 0 {
					cancel()
				}
				st, err := l.LimitAll(ctx, ratelimit.Request{Name: "a", Key: "k"}, ratelimit.Request{Name: "s", Key: "k"})
				cancel()
				if err == nil && st.OK {
					grantedA.Add(1)
					grantedS.Add(1)
				} else if err != nil && !errors.Is(err, context.Canceled) {
					t.Errorf("unexpected error %v", err)
				}
				st, err = l.Limit(ctx, ratelimit.Request{Name: "a", Key: "k"}) // ctx is canceled now
				if err == nil || st.OK {
					t.Errorf("Limit with a canceled context = %+v, %v", st, err)
				}
			}
		}(g)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(120 * time.Second):
		t.Fatal("did not finish: a canceled caller blocked the limiter")
	}
	// Grants acknowledged to callers must be counted; a caller whose context
	// ended while waiting may have been told "error" for a grant that was
	// still made (conservative), so the value may be lower, never higher.
	va := value(t, l, "a", "k").Value
	if want := 1e9 - float64(grantedA.Load()); va > want {
		t.Errorf("a: Value %v > capacity - acknowledged grants %v", va, want)
	}
	vs := value(t, l, "s", "k").Value
	if want := 1e9 - float64(grantedS.Load()); vs > want {
		t.Errorf("s: Value %v > capacity - acknowledged grants %v", vs, want)
	}
	if st := limit(t, l, ratelimit.Request{Name: "a", Key: "k"}); !st.OK {
		t.Errorf("limiter unusable after canceled callers: %+v", st)
	}
}
