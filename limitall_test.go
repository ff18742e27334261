package ratelimit

// LimitAll: all or nothing over several limits, repeats of one bucket, and
// freedom from deadlock whatever the order of its members.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// LimitAll over limits of every kind: all or none, RetryAfter the latest
// wait of the members that deny, reservations, bad members, repeats, and
// one member equal to Limit.
func TestLimitAll(t *testing.T) {
	t.Run("all or none", func(t *testing.T) {
		clk := newClock()
		l := open(t, Options{Now: clk.Now, Limits: limitAllLimits()})
		limit(t, l, Request{Name: "b", Key: "k", Count: 5})
		st, err := l.LimitAll(bg,
			Request{Name: "a", Key: "k", Count: 3},
			Request{Name: "w", Key: "k", Count: 2},
			Request{Name: "s", Key: "k", Count: 15},
			Request{Name: "b", Key: "k", Count: 1})
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
			Request{Name: "b", Key: "k", Count: 1},
			Request{Name: "a", Key: "k", Count: 3})
		if st.OK || st.RetryAfter != 12*S || st.Limit != "b" {
			t.Errorf("LimitAll(b, a) = %+v, want denied, RetryAfter 12s, Limit b", st)
		}
		wantValue(t, l, "a", "k", 10)
	})
	t.Run("a limit named empty", func(t *testing.T) { // "" is a name, not "no part chosen"
		clk := newClock()
		l := open(t, Options{Now: clk.Now, Limits: map[string]Config{
			"":  {Kind: TokenBucket, Rate: 1, Period: M},
			"x": {Kind: TokenBucket, Rate: 6, Period: M},
		}})
		rs := []Request{{Name: "", Key: "k"}, {Name: "x", Key: "k"}}
		if st, err := l.LimitAll(bg, rs...); err != nil || !st.OK || st.Limit != "" || st.Remaining != 0 {
			t.Fatalf("first LimitAll = %+v, %v; want granted, reporting \"\" (0 left, x 5)", st, err)
		}
		limit(t, l, Request{Name: "x", Key: "k", Count: 5})
		st, err := l.LimitAll(bg, rs...)
		if err != nil || st.OK || st.Limit != "" || st.RetryAfter != M {
			t.Fatalf("LimitAll with both empty = %+v, %v; want denied by \"\", RetryAfter 1m", st, err)
		}
	})
	t.Run("granted takes from every member", func(t *testing.T) {
		clk := newClock()
		l := open(t, Options{Now: clk.Now, Limits: limitAllLimits()})
		st, err := l.LimitAll(bg,
			Request{Name: "a", Key: "y", Count: 3},
			Request{Name: "b", Key: "y", Count: 2},
			Request{Name: "w", Key: "y"},
			Request{Name: "s", Key: "y", Count: 15},
			Request{Name: "a", Key: "", Count: 4})
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
		clk := newClock()
		l := open(t, Options{Now: clk.Now, Limits: limitAllLimits()})
		limit(t, l, Request{Name: "a", Key: "x", Count: 10}) // 1 token in 6s
		limit(t, l, Request{Name: "b", Key: "x", Count: 5})  // 1 token in 12s
		limit(t, l, Request{Name: "w", Key: "x", Count: 4})  // next window at t0+60s
		clk.Set(t0.Add(6 * S))                               // a holds 1, b holds 0.5, w 0 until t0+60s
		aHalf := Request{Name: "a", Key: "x", Count: 0.5}    // granted alone
		a3 := Request{Name: "a", Key: "x", Count: 3}         // 2 short: 12s
		b := Request{Name: "b", Key: "x", Count: 1}          // 0.5 short: 6s
		w := Request{Name: "w", Key: "x", Count: 1}          // next window: 54s
		cases := []struct {
			name  string
			rs    []Request
			retry time.Duration
			lim   []string
		}{
			{"a3 b", []Request{a3, b}, 12 * S, []string{"a", "b"}},
			{"b a3", []Request{b, a3}, 12 * S, []string{"a", "b"}},
			{"a3 w", []Request{a3, w}, 54 * S, []string{"a", "w"}},
			{"w b a3", []Request{w, b, a3}, 54 * S, []string{"w", "b", "a"}},
			{"b w", []Request{b, w}, 54 * S, []string{"w", "b"}},
			{"aHalf b", []Request{aHalf, b}, 6 * S, []string{"b"}},
			{"b aHalf", []Request{b, aHalf}, 6 * S, []string{"b"}},
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
		clk := newClock()
		l := open(t, Options{Now: clk.Now, Limits: limitAllLimits()})
		st, err := l.LimitAll(bg,
			Request{Name: "a", Key: "z", Count: 15, Reserve: true},
			Request{Name: "b", Key: "z", Count: 6, Reserve: true},
			Request{Name: "w", Key: "z", Count: 1, Reserve: true})
		if err != nil || !st.OK || st.RetryAfter != 30*S {
			t.Errorf("LimitAll reservations = %+v, %v; want granted with RetryAfter 30s", st, err)
		}
		wantValue(t, l, "a", "z", -5)
		wantValue(t, l, "b", "z", -1)
		wantValue(t, l, "w", "z", 3)
	})
	t.Run("a bad member takes nothing", func(t *testing.T) {
		clk := newClock()
		l := open(t, Options{Now: clk.Now, Limits: limitAllLimits()})
		bad := tb(-1, M)
		good := []Request{
			{Name: "a", Key: "k", Count: 3}, {Name: "s", Key: "k", Count: 15}, {Name: "w", Key: "k", Count: 1},
		}
		cases := []struct {
			name string
			r    Request
			want error
		}{
			{"unknown name", Request{Name: "nope", Key: "k"}, ErrUnknownLimit},
			{"NaN count", Request{Name: "b", Key: "k", Count: math.NaN()}, ErrInvalidCount},
			{"negative count", Request{Name: "b", Key: "k", Count: -2}, ErrInvalidCount},
			{"count above capacity", Request{Name: "b", Key: "k", Count: 6}, ErrInvalidCount},
			{"count above two shards", Request{Name: "s", Key: "other", Count: 21}, ErrInvalidCount},
			{"bad inline config", Request{Name: "inl", Key: "k", Config: &bad}, ErrInvalidConfig},
		}
		for _, c := range cases {
			for pos := 0; pos <= len(good); pos++ {
				rs := append(append(append([]Request(nil), good[:pos]...), c.r), good[pos:]...)
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
		clk := newClock()
		l := open(t, Options{Now: clk.Now, Limits: limitAllLimits()})
		st, err := l.LimitAll(bg,
			Request{Name: "a", Key: "d", Count: 6},
			Request{Name: "a", Key: "d", Count: 6})
		if err == nil && st.OK {
			t.Errorf("LimitAll(a/d 6, a/d 6) on capacity 10 granted: %+v", st)
		}
		v := value(t, l, "a", "d").Value
		if v != 10 {
			t.Errorf("after a refused double request, Value = %v, want 10", v)
		}
		st, err = l.LimitAll(bg,
			Request{Name: "a", Key: "e", Count: 4},
			Request{Name: "a", Key: "e", Count: 4})
		v = value(t, l, "a", "e").Value
		if err == nil && st.OK && v != 2 {
			t.Errorf("LimitAll(a/e 4, a/e 4) granted but Value = %v, want 2", v)
		}
		if (err != nil || !st.OK) && v != 10 {
			t.Errorf("LimitAll(a/e 4, a/e 4) refused (%+v, %v) but Value = %v, want 10", st, err, v)
		}
	})
	t.Run("same sharded limit twice keeps exact accounting", func(t *testing.T) {
		clk := newClock()
		l := open(t, Options{Now: clk.Now, Limits: limitAllLimits()})
		for i := 0; i < 20; i++ {
			key := fmt.Sprintf("ss%d", i)
			st, err := l.LimitAll(bg,
				Request{Name: "s", Key: key, Count: 8},
				Request{Name: "s", Key: key, Count: 8})
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
		clk := newClock()
		l := open(t, Options{Now: clk.Now, Limits: limitAllLimits()})
		for i := 0; i < 12; i++ {
			r := Request{Name: "a", Key: "one", Count: 1}
			chk, _ := l.Check(bg, r)
			st, err := l.LimitAll(bg, r)
			if err != nil || st != chk {
				t.Errorf("request %d: LimitAll(one) = %+v, %v; Check said %+v", i, st, err, chk)
			}
		}
		wantValue(t, l, "a", "one", 0)
	})
}

// A LimitAll naming one bucket more than once is decided member by member,
// in order, each against what the members before it took. Repeats that
// could never be granted together (at any time) are ErrInvalidCount, as
// SEMANTICS asks of a request that can never succeed, and take nothing;
// they were once denials whose RetryAfter never came true (reserve 1 then
// take 10 of a 10-token bucket: denied with 6 s, again and again). The
// same bucket named by Options.Limits and by an identical inline config is
// one bucket (the repeat check once compared limit objects); two different
// configs for one bucket in one call are ErrInvalidConfig (the second
// member was once decided under the first's).
func TestLimitAllRepeats(t *testing.T) {
	same, other := tb(10, M), tb(100, M) // "tb"'s config, and another
	for _, tc := range []struct {
		name string
		rs   []Request
		want error   // nil: granted
		left float64 // after a grant, what the first member's bucket holds
	}{
		{"take 6, take 6 of 10", []Request{{Name: "tb", Key: "k", Count: 6}, {Name: "tb", Key: "k", Count: 6}}, ErrInvalidCount, 0},
		{"take 6, reserve 6 of 10", []Request{{Name: "tb", Key: "k", Count: 6}, {Name: "tb", Key: "k", Count: 6, Reserve: true}}, nil, -2},
		{"reserve 1, take 10 of 10", []Request{{Name: "tb", Key: "k", Count: 1, Reserve: true}, {Name: "tb", Key: "k", Count: 10}}, ErrInvalidCount, 0},
		{"take 10, reserve 1 of 10", []Request{{Name: "tb", Key: "k", Count: 10}, {Name: "tb", Key: "k", Count: 1, Reserve: true}}, nil, -1},
		{"2 shards: take 10, take 10 of 10", []Request{{Name: "s2", Key: "k", Count: 10}, {Name: "s2", Key: "k", Count: 10}}, ErrInvalidCount, 0},
		{"2 shards: take 10, take 4 of 10", []Request{{Name: "s2", Key: "k", Count: 10}, {Name: "s2", Key: "k", Count: 4}}, ErrInvalidCount, 0},
		{"2 shards: take 6, take 4 of 10", []Request{{Name: "s2", Key: "k", Count: 6}, {Name: "s2", Key: "k", Count: 4}}, nil, 0},
		{"named and identical inline: take 6, take 6 of 10", []Request{{Name: "tb", Key: "k", Count: 6}, {Name: "tb", Key: "k", Count: 6, Config: &same}}, ErrInvalidCount, 0},
		{"named and other inline, one bucket", []Request{{Name: "tb", Key: "k", Count: 1}, {Name: "tb", Key: "k", Count: 1, Config: &other}}, ErrInvalidConfig, 0},
		{"named and other inline, two keys", []Request{{Name: "tb", Key: "k", Count: 1}, {Name: "tb", Key: "j", Count: 1, Config: &other}}, nil, 9},
		// Among many requests (found through a map, not by comparing pairs).
		{"40 requests: take 6, take 6 of 10", among(40, Request{Name: "tb", Key: "k", Count: 6}, Request{Name: "tb", Key: "k", Count: 6}), ErrInvalidCount, 0},
		{"40 requests: take 6, take 4 of 10", among(40, Request{Name: "tb", Key: "k", Count: 6}, Request{Name: "tb", Key: "k", Count: 4}), nil, 0},
		{"40 requests: named and other inline", among(40, Request{Name: "tb", Key: "k", Count: 1}, Request{Name: "tb", Key: "k", Count: 1, Config: &other}), ErrInvalidConfig, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			l := open(t, Options{Now: clk.Now, Limits: map[string]Config{"tb": tb(10, M), "s2": withShards(tb(10, M), 2)}})
			st, err := l.LimitAll(bg, tc.rs...)
			if tc.want != nil {
				if !errors.Is(err, tc.want) {
					t.Fatalf("LimitAll = %+v, %v; want %v", st, err, tc.want)
				}
				for _, r := range tc.rs {
					wantValue(t, l, r.Name, r.Key, 10) // took nothing
				}
				return
			}
			if err != nil || !st.OK {
				t.Fatalf("LimitAll = %+v, %v; want granted", st, err)
			}
			wantValue(t, l, tc.rs[0].Name, tc.rs[0].Key, tc.left)
		})
	}
}

// among is n requests of 1 token on distinct keys of "tb", with first
// and last in their places (first first).
func among(n int, first, last Request) []Request {
	rs := make([]Request, n)
	for i := range rs {
		rs[i] = Request{Name: "tb", Key: fmt.Sprint("other-", i), Count: 1}
	}
	rs[0], rs[n-1] = first, last
	return rs
}

// A LimitAll with valid and denied members takes nothing; repeated members
// on one bucket that fit are granted and counted once each.
func TestLimitAllAllOrNothing(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	sh := tb(40, time.Minute)
	sh.Shards = 4
	l := open(t, Options{Now: clk.Now, Limits: map[string]Config{"a": tb(10, time.Minute), "b": fw(3, time.Minute, time.Time{}), "sh": sh}})
	st, err := l.LimitAll(ctx,
		Request{Name: "a", Key: "k", Count: 2}, Request{Name: "a", Key: "k", Count: 3},
		Request{Name: "sh", Key: "k", Count: 10}, Request{Name: "b", Key: "k", Count: 3})
	if err != nil || !st.OK {
		t.Fatalf("fitting call: %+v %v", st, err)
	}
	if v := value(t, l, "a", "k").Value; v != 5 {
		t.Errorf("a = %v, want 5", v)
	}
	st, err = l.LimitAll(ctx,
		Request{Name: "a", Key: "k", Count: 2}, Request{Name: "sh", Key: "k", Count: 10},
		Request{Name: "b", Key: "k", Count: 1})
	if err != nil || st.OK || st.Limit != "b" || st.RetryAfter <= 0 {
		t.Fatalf("denied call: %+v %v", st, err)
	}
	for n, want := range map[string]float64{"a": 5, "sh": 30, "b": 0} {
		if v := value(t, l, n, "k").Value; v != want {
			t.Errorf("%s = %v after a denied LimitAll, want %v", n, v, want)
		}
	}
	// take then reserve on one bucket (the documented-working order)
	if st, err := l.LimitAll(ctx, Request{Name: "a", Key: "r", Count: 10}, Request{Name: "a", Key: "r", Count: 1, Reserve: true}); err != nil || !st.OK || st.RetryAfter != 6*time.Second {
		t.Errorf("take 10 then reserve 1: %+v, %v", st, err)
	}
}

// Requests in opposite orders over many partitions must not deadlock and
// must keep exact accounting.
func TestLimitAllNoDeadlock(t *testing.T) {
	limits := map[string]Config{}
	var names []string
	for i := 0; i < 8; i++ {
		n := fmt.Sprintf("l%d", i)
		names = append(names, n)
		limits[n] = withCap(tb(1, H), 1e6)
	}
	clk := newClock()
	l := open(t, Options{Limits: limits, Now: clk.Now, Partitions: 8})
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
				rs := make([]Request, len(perm))
				for j, p := range perm {
					rs[j] = Request{Name: names[p], Key: "hot"}
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
	waitDone(t, wgDone(&wg), "LimitAll callers in opposite orders (deadlock?)")
	for i, n := range names {
		wantValue(t, l, n, "hot", 1e6-float64(granted[i].Load()))
	}
}

func TestLimitAllStatusesReportsEachPart(t *testing.T) {
	clk := newClock()
	l := open(t, Options{Now: clk.Now, Limits: map[string]Config{
		"user": tokenBucket(10, 10), "global": tokenBucket(100, 100),
	}})
	ctx := context.Background()
	rs := []Request{{Name: "user", Key: "u", Count: 4}, {Name: "global", Count: 30}}
	st, each, err := l.LimitAllStatuses(ctx, rs, nil)
	if err != nil || !st.OK || len(each) != 2 {
		t.Fatalf("LimitAllStatuses = %+v, %+v, %v", st, each, err)
	}
	if !each[0].OK || each[0].Limit != "user" || each[0].Remaining != 6 || !each[1].OK || each[1].Limit != "global" || each[1].Remaining != 70 {
		t.Fatalf("each = %+v, want user 6 left and global 70 left", each)
	}
	if st.Limit != "user" || st.Remaining != 6 {
		t.Fatalf("overall = %+v, want the part with the fewest left (user)", st)
	}
	// Now the user part fails: nothing is taken from either bucket, the
	// global part reports what it would have left.
	rs[0].Count = 7
	st, each, err = l.LimitAllStatuses(ctx, rs, each)
	if err != nil || st.OK || len(each) != 2 {
		t.Fatalf("LimitAllStatuses = %+v, %+v, %v", st, each, err)
	}
	if each[0].OK || each[0].RetryAfter <= 0 || !each[1].OK || each[1].Remaining != 40 {
		t.Fatalf("each = %+v, want user denied with a wait, global granted with 40 left", each)
	}
	if v := value(t, l, "user", "u").Value; v != 6 {
		t.Fatalf("user value after a denied call = %v, want 6", v)
	}
	if v := value(t, l, "global", "").Value; v != 70 {
		t.Fatalf("global value after a denied call = %v, want 70", v)
	}
}

// A CheckOnly part must pass for the call to be granted, and takes
// nothing either way.
func TestLimitAllCheckOnlyPart(t *testing.T) {
	clk := newClock()
	l := open(t, Options{Now: clk.Now, Limits: map[string]Config{
		"user": tokenBucket(10, 10), "global": tokenBucket(100, 100),
	}})
	ctx := context.Background()
	check := Request{Name: "global", Count: 50, CheckOnly: true}
	for i := 0; i < 3; i++ {
		st, err := l.LimitAll(ctx, Request{Name: "user", Key: "u", Count: 2}, check)
		if err != nil || !st.OK {
			t.Fatalf("call %d = %+v, %v; want a grant", i, st, err)
		}
	}
	if v := value(t, l, "global", "").Value; v != 100 {
		t.Fatalf("global after three checks = %v, want 100 (untouched)", v)
	}
	grant(t, l, Request{Name: "global", Key: "", Count: 60}) // 40 left: the check of 50 now fails
	st, err := l.LimitAll(ctx, Request{Name: "user", Key: "u", Count: 2}, check)
	if err != nil || st.OK || st.Limit != "global" {
		t.Fatalf("call with a failing check = %+v, %v; want denied by global", st, err)
	}
	if v := value(t, l, "user", "u").Value; v != 4 {
		t.Fatalf("user after the denied call = %v, want 4", v)
	}
	// Limit honours CheckOnly too.
	if st, err := l.Limit(ctx, Request{Name: "user", Key: "u", Count: 4, CheckOnly: true}); err != nil || !st.OK {
		t.Fatalf("Limit(CheckOnly) = %+v, %v", st, err)
	}
	if v := value(t, l, "user", "u").Value; v != 4 {
		t.Fatalf("user after Limit(CheckOnly) = %v, want 4", v)
	}
}

// A denied LimitAll naming one bucket several times waits for all of
// them, in order: RetryAfter is when the same call is granted, not when
// its first denied member alone would be; each member's own status is as
// decided (a denial reports what its bucket holds).
func TestLimitAllRepeatsRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		rs   []Request
		wait time.Duration
	}{
		{"take 5, take 5 of an empty 10", tb(10, 10*time.Second),
			[]Request{{Name: "x", Count: 5}, {Name: "x", Count: 5}}, 10 * time.Second},
		{"take 5, check 5 of an empty 10", tb(10, 10*time.Second),
			[]Request{{Name: "x", Count: 5}, {Name: "x", Count: 5, CheckOnly: true}}, 10 * time.Second},
		{"check 5, take 5 of an empty 10", tb(10, 10*time.Second),
			[]Request{{Name: "x", Count: 5, CheckOnly: true}, {Name: "x", Count: 5}}, 5 * time.Second},
		{"take 3, reserve 4 of an empty 10, 5 of debt", Config{Kind: TokenBucket, Rate: 10, Period: 10 * time.Second, MaxReserved: 5},
			[]Request{{Name: "x", Count: 3}, {Name: "x", Count: 4, Reserve: true}}, 3 * time.Second},
		{"fixed window: take 5, take 5 of an empty 10, 5 a window", Config{Kind: FixedWindow, Rate: 5, Period: 10 * time.Second, Capacity: 10, Start: t0},
			[]Request{{Name: "x", Count: 5}, {Name: "x", Count: 5}}, 20 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			l := open(t, Options{Now: clk.Now, Limits: map[string]Config{"x": tc.cfg}})
			c := tc.cfg.Capacity
			if c == 0 {
				c = tc.cfg.Rate
			}
			limit(t, l, Request{Name: "x", Count: c})
			st, each, err := l.LimitAllStatuses(bg, tc.rs, nil)
			if err != nil || st.OK || st.RetryAfter != tc.wait || st.Remaining < 0 {
				t.Fatalf("LimitAll = %+v, %v; want denied for %v, reporting no debt", st, err, tc.wait)
			}
			for i, ms := range each {
				if ms.Remaining < 0 && !tc.rs[i].Reserve { // a reservation that could be granted reports its debt
					t.Errorf("member %d reports %v left: debt the bucket does not hold", i, ms.Remaining)
				}
			}
			clk.Advance(tc.wait - 1)
			if st, err := l.LimitAll(bg, tc.rs...); err != nil || st.OK {
				t.Fatalf("a nanosecond early: %+v, %v; want denied", st, err)
			}
			clk.Advance(1)
			if st, err := l.LimitAll(bg, tc.rs...); err != nil || !st.OK {
				t.Fatalf("after RetryAfter: %+v, %v; want granted", st, err)
			}
		})
	}
}

// A LimitAll that names one limit twice, racing calls that change it
// (SetLimits, or requests carrying another inline config of the name, the
// one requests without a config then read), is decided against one
// config of it: granted or denied, never refused as if the caller had
// given two configs.
func TestLimitAllRacingConfigChanges(t *testing.T) {
	a, b := tb(1e9, M), tb(2e9, M)
	for _, c := range []struct {
		name   string
		limits map[string]Config
		change func(l *Limiter, i int)
	}{
		{"SetLimits", map[string]Config{"a": a}, func(l *Limiter, i int) {
			l.SetLimits([]map[string]Config{{"a": a}, {"a": b}}[i%2])
		}},
		{"inline", nil, func(l *Limiter, i int) {
			l.Limit(bg, Request{Name: "a", Key: "other", Config: []*Config{&a, &b}[i%2]})
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := open(t, Options{Limits: c.limits})
			c.change(l, 0)
			var stop atomic.Bool
			done := make(chan struct{})
			go func() {
				defer close(done)
				for i := 0; !stop.Load(); i++ {
					c.change(l, i)
				}
			}()
			defer func() { stop.Store(true); <-done }()
			for i := range 20_000 {
				call := []Request{{Name: "a", Key: "k"}, {Name: "a", Key: "k"}}
				if c.limits == nil && i%2 == 1 {
					call[0].Config = &a // then the second reads a too, the name's latest config in the call
				}
				if _, err := l.LimitAll(bg, call...); err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
			}
		})
	}
}

// A denied LimitAll that names one bucket more than once has the exact
// RetryAfter: retried that long after, it is granted, and a nanosecond
// sooner it is not. Two limiters take the same steps, one retrying at
// RetryAfter, the other a nanosecond sooner.
func TestLimitAllRepeatsRetryAfterIsExact(t *testing.T) {
	type scenario struct {
		cfg     Config
		before  []Request       // granted or not, one after another
		advance []time.Duration // after each of before
		call    []Request
	}
	cases := []scenario{{ // rounding once put the retry a nanosecond early
		cfg:     withMaxRes(withCap(tb(5, M), 8), 6),
		before:  []Request{{Name: "b", Count: 8.25, Reserve: true}, {Name: "b", Count: 5.5, Reserve: true}},
		advance: []time.Duration{27353826537, 435},
		call:    []Request{{Name: "b", Count: 6.5, Reserve: true}, {Name: "b", Count: 0.25}},
	}}
	rng := rand.New(rand.NewPCG(1, 2))
	counts := []float64{0.25, 0.5, 1, 1.5, 2.75, 3, 4, 6.5}
	for range 3000 {
		c := withCap(tb(float64(1+rng.IntN(9)), time.Duration(1+rng.IntN(60))*time.Second), float64(2+rng.IntN(10)))
		if rng.IntN(3) == 0 {
			c = withCap(fw(float64(2+rng.IntN(9)), time.Duration(1+rng.IntN(60))*time.Second, time.Time{}), 0)
		}
		if rng.IntN(2) == 0 {
			c = withMaxRes(c, float64(rng.IntN(8)))
		}
		s := scenario{cfg: c}
		for range 1 + rng.IntN(4) {
			s.before = append(s.before, Request{Name: "b", Count: counts[rng.IntN(len(counts))], Reserve: rng.IntN(2) == 0})
			s.advance = append(s.advance, time.Duration(rng.Int64N(int64(5*time.Second))))
		}
		for range 2 + rng.IntN(3) {
			s.call = append(s.call, Request{Name: "b", Count: counts[rng.IntN(len(counts))], Reserve: rng.IntN(2) == 0, CheckOnly: rng.IntN(5) == 0})
		}
		cases = append(cases, s)
	}
	denied := 0
	for n, s := range cases {
		run := func(sooner time.Duration) (Status, Status, error) {
			clk := newClock()
			l := open(t, Options{Now: clk.Now, Limits: map[string]Config{"b": s.cfg}})
			defer l.Close()
			for i, r := range s.before {
				l.Limit(bg, r)
				clk.Advance(s.advance[i])
			}
			st, err := l.LimitAll(bg, s.call...)
			if err != nil || st.OK || st.RetryAfter <= 0 || st.RetryAfter > time.Hour {
				return st, Status{}, err
			}
			clk.Advance(st.RetryAfter - sooner)
			again, err := l.LimitAll(bg, s.call...)
			return st, again, err
		}
		st, at, err := run(0)
		if err != nil || st.OK || st.RetryAfter <= 0 || st.RetryAfter > time.Hour {
			continue
		}
		denied++
		if !at.OK {
			t.Fatalf("case %d (%+v): denied with RetryAfter %v, and denied again then: %+v", n, s, st.RetryAfter, at)
		}
		if _, early, err := run(time.Nanosecond); err != nil || early.OK {
			t.Fatalf("case %d (%+v): denied with RetryAfter %v, but granted a nanosecond sooner (%v)", n, s, st.RetryAfter, err)
		}
	}
	if denied < 500 {
		t.Fatalf("only %d of %d cases were denied with a wait", denied, len(cases))
	}
}
