package ratelimit

// Limit and Check: scripted (time, count, ok) steps against fixed instants,
// RetryAfter never early, Check never writing, keys and fixed-window phases.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/seed7fbd42b6/ratelimit/ratelimittest"
)

// The worked cases of SEMANTICS.md and more: token buckets and fixed
// windows, capacity above and below rate, count 0, fractional counts,
// window starts before and after now. (Reservations: TestReserveWorkedCases.)
func TestWorkedCases(t *testing.T) {
	fwT0 := fw(10, M, t0)
	runWorkedCases(t, []workedCase{
		{"token bucket basic", tb(10, M), []step{
			{at: 0, count: 5, ok: true, value: 5, ts: 0},
			{at: 6 * S, count: 6, ok: true, value: 0, ts: 6 * S},
			{at: 6 * S, count: 10, ok: false, retry: 60 * S, value: 0, ts: 6 * S},
			{at: 36 * S, peek: true, value: 5, ts: 36 * S},
			{at: 66 * S, peek: true, value: 10, ts: 66 * S},
			{at: 10 * H, peek: true, value: 10, ts: 10 * H},
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
		{"token bucket count above capacity", tb(1, S), []step{
			{at: 0, count: 2, err: ErrInvalidCount, value: 1, ts: 0},
			{at: 0, count: 1, ok: true, value: 0, ts: 0},
			{at: 0, count: 2, err: ErrInvalidCount, value: 0, ts: 0},
		}},
		{"fixed window count above capacity", fw(1, S, t0), []step{
			{at: 0, count: 2, err: ErrInvalidCount, value: 1, ts: 0},
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
			{at: 0, count: 4, err: ErrInvalidCount, value: 3, ts: 0},
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
	})
}

// A grant's Status: OK, no wait, the limit's name; a reservation that fits
// needs no wait either.
func TestStatusOnGrant(t *testing.T) {
	clk := newClock()
	l := open(t, Options{Now: clk.Now, Limits: map[string]Config{"a": tb(10, M), "f": fw(10, M, t0)}})
	for _, name := range []string{"a", "f"} {
		st := limit(t, l, Request{Name: name, Key: "k", Count: 3})
		if !st.OK || st.RetryAfter != 0 || st.Limit != name {
			t.Errorf("%s: plain grant status = %+v, want {OK:true RetryAfter:0 Limit:%q}", name, st, name)
		}
		// a reservation that fits needs no wait
		st = limit(t, l, Request{Name: name, Key: "k", Count: 3, Reserve: true})
		if !st.OK || st.RetryAfter != 0 {
			t.Errorf("%s: reservation within capacity = %+v, want OK with RetryAfter 0", name, st)
		}
	}
}

// Over many configs, delays and counts: a request denied with RetryAfter d
// is still denied 1 ms before d and granted exactly at d.
func TestRetryAfterNeverEarly(t *testing.T) {
	start := t0.Add(123456789 * time.Nanosecond)
	cfgs := []Config{
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
			clk := newClock()
			l := open(t, Options{Now: clk.Now, Limits: map[string]Config{"lim": cfg}})
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
					if st := limit(t, l, Request{Name: "lim", Key: key, Count: capacity}); !st.OK {
						t.Fatalf("draining a fresh bucket of %v: denied %+v", capacity, st)
					}
					checkNeverEarly(t, clk, l, "lim", key, at.Add(d), c)
				}
			}
		})
	}
}

// Waits beyond time.Duration's range saturate (over a century) instead of
// wrapping negative; tiny rates give waits that are not early.
func TestHugeRetryAfterNeverNegative(t *testing.T) {
	clk := newClock()
	l := open(t, Options{Now: clk.Now, Limits: map[string]Config{
		"slow":   tb(1e-9, H),
		"slowfw": fw(1e-9, H, t0),
		"res":    tb(1, H),
		"resfw":  fw(1, H, t0),
	}})
	for _, name := range []string{"slow", "slowfw"} {
		limit(t, l, Request{Name: name, Count: 1e-9})
		st := limit(t, l, Request{Name: name, Count: 1e-9})
		// the true wait is one hour (1e-9 tokens at 1e-9/h); at least it must
		// be positive and not early
		if st.OK || st.RetryAfter < H {
			t.Errorf("%s: second request = %+v, want denied with RetryAfter >= 1h", name, st)
		}
	}
	for _, name := range []string{"res", "resfw"} {
		st := limit(t, l, Request{Name: name, Count: 1e12, Reserve: true})
		// the wait is ~1e12 hours, beyond time.Duration: it must saturate
		// (at anything over a century), not wrap
		if !st.OK || st.RetryAfter < 100*365*24*H {
			t.Errorf("%s: reserving 1e12 tokens at 1/h = %+v, want granted with a huge (saturated) RetryAfter", name, st)
		}
		st = limit(t, l, Request{Name: name, Count: 1})
		if st.OK || st.RetryAfter < 100*365*24*H {
			t.Errorf("%s: after a 1e12 debt, request = %+v, want denied with a huge RetryAfter", name, st)
		}
	}
}

// A fixed window's RetryAfter could be a whole window late (never early):
// {fixed window, rate 0.3/min, capacity 1}: take 0.3 (0.7 left), ask 1 ->
// RetryAfter was 1m59.999999996s, but the request is granted at 1 min
// (0.7 + 0.3 == 1 in float64, while 1 - 0.7 = 0.30000000000000004 made the
// estimate 2 windows). Status promises the earliest wait: now 1 min.
func TestFixedWindowRetryAfterNotAWindowLate(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	cfg := Config{Kind: FixedWindow, Rate: 0.3, Period: time.Minute, Capacity: 1, Start: t0}
	l := open(t, Options{Now: clk.Now, Limits: map[string]Config{"w": cfg}})
	if st, err := l.Limit(ctx, Request{Name: "w", Count: 0.3}); err != nil || !st.OK {
		t.Fatal(st, err)
	}
	r := Request{Name: "w", Count: 1}
	st, err := l.Limit(ctx, r)
	if err != nil || st.OK {
		t.Fatal(st, err)
	}
	if st.RetryAfter != time.Minute {
		t.Errorf("denied with RetryAfter %v, want %v (the next window)", st.RetryAfter, time.Minute)
	}
	clk.Set(t0.Add(time.Minute))
	if again, err := l.Check(ctx, r); err != nil || !again.OK {
		t.Errorf("after %v: %+v, %v; want granted", time.Minute, again, err)
	}
}

// Check answers as Limit would at that moment and writes nothing: repeated
// Checks agree, values and ts stay, the following Limit says the same.
func TestCheckNeverWrites(t *testing.T) {
	for _, cfg := range []Config{withMaxRes(tb(10, M), 10), withMaxRes(fw(10, M, t0), 10), withShards(tb(40, M), 4)} {
		t.Run(cfg.Kind.String()+fmt.Sprintf("-shards%d", cfg.Shards), func(t *testing.T) {
			clk := newClock()
			l := open(t, Options{Now: clk.Now, Limits: map[string]Config{"c": cfg}})
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
				r := Request{Name: "c", Key: "k", Count: s.count, Reserve: s.reserve}
				before := value(t, l, "c", "k")
				var chk Status
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

// The key "" is the limit's one shared bucket, distinct from every other
// key and from other limits.
func TestGlobalKeyIsDistinct(t *testing.T) {
	clk := newClock()
	l := open(t, Options{Now: clk.Now, Limits: map[string]Config{"a": tb(10, M), "b": tb(10, M)}})
	limit(t, l, Request{Name: "a", Key: "", Count: 10})
	if st := limit(t, l, Request{Name: "a", Key: ""}); st.OK {
		t.Errorf("global bucket not exhausted")
	}
	for _, k := range []string{"x", " ", "\x00", "a"} {
		if st := limit(t, l, Request{Name: "a", Key: k}); !st.OK {
			t.Errorf("key %q shares the global bucket: %+v", k, st)
		}
	}
	wantValue(t, l, "a", "", 0)
	wantValue(t, l, "b", "", 10)
}

// Every key is its own bucket, whatever its bytes (NUL, invalid UTF-8,
// keys differing in their last byte, 64 KiB long), and a name and a key
// never run together.
func TestKeys(t *testing.T) {
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
	clk := newClock()
	l := open(t, Options{Now: clk.Now, Limits: map[string]Config{"t": tb(100, M), "f": fw(100, M, time.Time{}), "s": withShards(tb(100, M), 4)}})
	for _, name := range []string{"t", "f", "s"} {
		t.Run(name, func(t *testing.T) {
			// key i takes i+1 tokens; every key must keep its own count
			for i, k := range keys {
				st, err := l.Limit(bg, Request{Name: name, Key: k, Count: float64(i + 1)})
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
		l, err := Open(Options{Now: clk.Now, Limits: map[string]Config{
			"a": tb(10, M), "ab": tb(10, M), "a\x00": tb(10, M), "a\x00b": tb(10, M), "a:": tb(10, M)}})
		if errors.Is(err, ErrInvalidConfig) {
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
			limit(t, l, Request{Name: p.name, Key: p.key, Count: float64(i + 1)})
		}
		for i, p := range pairs {
			wantValue(t, l, p.name, p.key, 10-float64(i+1))
		}
	})
}

// A fixed window without Start begins at a phase per (name, key): spread
// over the period, the same in every limiter and after a reset, and what
// decides when the next window opens.
func TestFixedWindowPhase(t *testing.T) {
	const nKeys = 256
	cfg := fw(1, H, time.Time{})
	limits := map[string]Config{"fw": cfg, "fw2": cfg}
	clk := newClock()
	l := open(t, Options{Now: clk.Now, Limits: limits})
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
			if st := limit(t, l, Request{Name: "fw", Key: k}); !st.OK {
				t.Fatalf("first request denied")
			}
			st := limit(t, l, Request{Name: "fw", Key: k})
			if want := ts[i].Add(H).Sub(t0); st.OK || st.RetryAfter != want {
				t.Errorf("key %s: second request = %+v, want denied with RetryAfter %v (next window)", k, st, want)
			}
			clk.Set(ts[i].Add(H - 1))
			if st := limit(t, l, Request{Name: "fw", Key: k}); st.OK || st.RetryAfter != 1 {
				t.Errorf("key %s: 1ns before the window = %+v, want denied with RetryAfter 1ns", k, st)
			}
			clk.Set(ts[i].Add(H))
			if st := limit(t, l, Request{Name: "fw", Key: k}); !st.OK {
				t.Errorf("key %s: at the next window start: denied %+v", k, st)
			}
		}
	})

	t.Run("same after reset", func(t *testing.T) {
		clk.Set(t0.Add(2*H + 17*M))
		for i := 0; i < 32; i++ {
			k := fmt.Sprintf("user-%d", i)
			limit(t, l, Request{Name: "fw", Key: k})
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
		clk2 := ratelimittest.NewClock(t0.Add(37*M + 123))
		l2 := open(t, Options{Now: clk2.Now, Limits: limits})
		for i := 0; i < nKeys; i++ {
			k := fmt.Sprintf("user-%d", i)
			v := value(t, l2, "fw", k)
			if d := v.TS.Sub(ts[i]); d%H != 0 {
				t.Errorf("key %s: second limiter's window start differs by %v (not a whole period)", k, d)
			}
		}
	})
}

// A Start before 1970 aligns windows like any other; one before 1678
// (outside time.Time's UnixNano) is ErrInvalidConfig.
func TestFixedWindowStartBefore1970(t *testing.T) {
	start := time.Unix(-1, 0) // windows at ..., -1 s, 59 s, 119 s, ...
	clk := newClock()
	clk.Set(time.Unix(100, 0))
	l := open(t, Options{Now: clk.Now, Limits: map[string]Config{
		"w": {Kind: FixedWindow, Rate: 1, Period: time.Minute, Start: start},
	}})
	v, err := l.Value(context.Background(), "w", "")
	if err != nil || !v.TS.Equal(time.Unix(59, 0)) {
		t.Fatalf("window start %v (%v), want 59 s", v.TS, err)
	}
	if _, err := Open(Options{Limits: map[string]Config{"w": {Kind: FixedWindow, Rate: 1, Period: time.Minute, Start: time.Date(1500, 1, 1, 0, 0, 0, 0, time.UTC)}}}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("start in 1500: %v", err)
	}
}

// The memory-mode hot path allocates nothing per decision.
func TestHotPathDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	l := open(t, Options{Limits: map[string]Config{"u": {Kind: TokenBucket, Rate: 1e9, Period: time.Second}}})
	ctx := context.Background()
	keys := []string{"a", "b", "c", "d"}
	i := 0
	if n := testing.AllocsPerRun(2000, func() {
		i++
		l.Limit(ctx, Request{Name: "u", Key: keys[i%4]})
	}); n != 0 {
		t.Fatalf("Limit allocates %v per call", n)
	}
	rs := make([]Request, 64)
	for j := range rs {
		rs[j] = Request{Name: "u", Key: keys[j%4]}
	}
	out := make([]Decision, 0, 64)
	if n := testing.AllocsPerRun(500, func() { out = l.LimitMany(ctx, rs, out) }); n != 0 {
		t.Fatalf("LimitMany allocates %v per call", n)
	}
}
