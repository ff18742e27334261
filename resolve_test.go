package ratelimit

// Resolving a request's limit: inline configs and their cache.

import (
	"context"
	"errors"
	"testing"
	"time"
)

// An inline config limits like a named one and wins over Options.Limits
// for its request.
func TestInlineConfig(t *testing.T) {
	clk := newClock()
	l := open(t, Options{Now: clk.Now, Limits: map[string]Config{"named": tb(10, M)}})
	inline := tb(3, M)
	r := Request{Name: "inl", Key: "k", Config: &inline}
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
	if _, err := l.Limit(bg, Request{Name: "named", Key: "z", Count: 3, Config: &small}); !errors.Is(err, ErrInvalidCount) {
		t.Errorf("inline capacity 2 over named capacity 10, count 3: err = %v, want ErrInvalidCount", err)
	}
	big := withCap(tb(10, M), 50)
	if st, err := l.Limit(bg, Request{Name: "inl2", Key: "z", Count: 30, Config: &big}); err != nil || !st.OK {
		t.Errorf("inline capacity 50, count 30: %+v, %v; want granted", st, err)
	}
}

// The inline-config cache key mapped every out-of-range Start to the key of
// a Start at the Unix epoch: once a config with Start 1970-01-01 had been
// used, the same config with Start in 1500 or 2500 (ErrInvalidConfig on
// its own, and at Open) was accepted and decided under the epoch phase.
func TestInlineStartOutOfRangeNotCached(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	l := open(t, Options{Now: clk.Now})
	good := fw(1, time.Minute, time.Time{})
	good.Start = time.Unix(0, 0)
	bad := good
	bad.Start = time.Date(2500, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := l.Check(ctx, Request{Name: "w", Config: &bad}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("baseline: Start 2500 inline: %v, want ErrInvalidConfig", err)
	}
	if _, err := l.Limit(ctx, Request{Name: "w", Config: &good}); err != nil {
		t.Fatalf("Start 1970 inline: %v", err)
	}
	for _, y := range []int{1500, 2500} {
		bad.Start = time.Date(y, 1, 1, 0, 0, 0, 0, time.UTC)
		st, err := l.Limit(ctx, Request{Name: "w", Key: "x", Config: &bad})
		if !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("Start %d inline after a Start-1970 config was used: %+v, %v; want ErrInvalidConfig", y, st, err)
		}
	}
}

// Reset, Value, Credit and Config on an inline-only name use the latest
// inline config seen for it, which was updated only when a config was
// first cached: after configs A (4 shards), B (1 shard), A again, the name
// resolved to B, and Reset deleted only shard 0 of A's buckets.
func TestInlineNameFollowsLatestConfig(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	l := open(t, Options{Now: clk.Now})
	a := tb(40, time.Minute)
	a.Shards = 4
	b := tb(10, time.Minute)
	_, _ = l.Limit(ctx, Request{Name: "x", Key: "k", Count: 1, Config: &a})
	_, _ = l.Limit(ctx, Request{Name: "x", Key: "other", Count: 1, Config: &b})
	for i := 0; i < 4; i++ { // drain A's buckets for k (2 shards at a time)
		_, _ = l.Limit(ctx, Request{Name: "x", Key: "k", Count: 20, Config: &a, Reserve: true})
	}
	if c, _ := l.Config("x"); c.Shards != 4 {
		t.Errorf("Config(x) after the latest request used A (4 shards): Shards = %d", c.Shards)
	}
	if err := l.Reset(ctx, "x", "k"); err != nil {
		t.Fatal(err)
	}
	if st, err := l.Check(ctx, Request{Name: "x", Key: "k", Count: 20, Config: &a}); err != nil || !st.OK {
		t.Errorf("after Reset(x, k), Check(20) with A = %+v, %v; want granted (the bucket is full again)", st, err)
	}
}

// The named limits resolved lately (Limiter.recent) answer as the map
// does: two names sharing a slot, requested in turn, each get their own
// limit; after SetLimits, a removed limit is unknown and a changed one
// gets its new config, though the slot held them.
func TestRecentNamesFollowSetLimits(t *testing.T) {
	a, b := "a", ""
	for i := 0; b == ""; i++ {
		if n := "n" + string(rune('a'+i%26)) + string(rune('a'+i/26)); recentSlot(n) == recentSlot(a) {
			b = n
		}
	}
	clk := newClock()
	l := open(t, Options{Now: clk.Now, Limits: map[string]Config{a: tb(1, M), b: tb(3, M)}})
	granted := func(name, key string) (n int) {
		for range 5 {
			st, err := l.Limit(context.Background(), Request{Name: name, Key: key})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if st.OK {
				n++
			}
		}
		return n
	}
	if ga, gb := granted(a, "k"), granted(b, "k"); ga != 1 || gb != 3 {
		t.Fatalf("granted %d of %q, %d of %q; want 1 and 3", ga, a, gb, b)
	}
	if err := l.SetLimits(map[string]Config{a: tb(2, M)}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Limit(context.Background(), Request{Name: b, Key: "k"}); !errors.Is(err, ErrUnknownLimit) {
		t.Errorf("%q after SetLimits removed it: %v, want ErrUnknownLimit", b, err)
	}
	if ga := granted(a, "k2"); ga != 2 {
		t.Errorf("granted %d of a new key of %q after SetLimits, want 2", ga, a)
	}
	if err := l.SetLimits(map[string]Config{a: tb(4, M)}); err != nil {
		t.Fatal(err)
	}
	if c, _ := l.Config(a); c.Capacity != 4 {
		t.Errorf("%q after a second SetLimits: capacity %v, want 4", a, c.Capacity)
	}
	if ga := granted(a, "k3"); ga != 4 {
		t.Errorf("granted %d of a new key of %q after a second SetLimits, want 4", ga, a)
	}
}
