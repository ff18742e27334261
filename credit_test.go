package ratelimit

// Credit (tokens given back, water-filling over shards) and Jitter.

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Credit gives tokens back, capped at capacity, reservations' debt
// included; bad counts and unknown limits are refused; a credit is durable
// like a grant.
func TestCredit(t *testing.T) {
	clk := newClock()
	ctx := context.Background()
	opts := Options{Path: filepath.Join(t.TempDir(), "rl.db"), Limits: durableLimits, Now: clk.Now}
	l := open(t, opts)
	limit(t, l, Request{Name: "tb", Key: "u", Count: 8})
	if err := l.Credit(ctx, "tb", "u", 3); err != nil {
		t.Fatal(err)
	}
	if v := value(t, l, "tb", "u").Value; v != 5 {
		t.Fatalf("after credit 3: %v, want 5", v)
	}
	if err := l.Credit(ctx, "tb", "u", 100); err != nil {
		t.Fatal(err)
	}
	if v := value(t, l, "tb", "u").Value; v != 10 {
		t.Fatalf("credit is capped at capacity: %v, want 10", v)
	}
	// A reservation's debt can be credited back.
	limit(t, l, Request{Name: "tb", Key: "debt", Count: 30, Reserve: true})
	if err := l.Credit(ctx, "tb", "debt", 15); err != nil {
		t.Fatal(err)
	}
	if v := value(t, l, "tb", "debt").Value; v != -5 {
		t.Fatalf("debt after credit: %v, want -5", v)
	}
	for _, bad := range []float64{-1, math.NaN(), math.Inf(1)} {
		if err := l.Credit(ctx, "tb", "debt", bad); !errors.Is(err, ErrInvalidCount) {
			t.Fatalf("Credit(%v): %v", bad, err)
		}
	}
	if err := l.Credit(ctx, "nope", "", 1); !errors.Is(err, ErrUnknownLimit) {
		t.Fatalf("unknown: %v", err)
	}
	// Durable like any grant.
	l.Close()
	l = open(t, opts)
	if v := value(t, l, "tb", "debt").Value; v != -5 {
		t.Fatalf("credit after reopen: %v, want -5", v)
	}
}

// A sharded credit fills the emptiest shards first (water-filling).
func TestCreditShardedFillsEmptiest(t *testing.T) {
	clk := newClock()
	ctx := context.Background()
	l := open(t, Options{Now: clk.Now, Limits: map[string]Config{
		"s": {Kind: TokenBucket, Rate: 40, Period: time.Hour, Shards: 4},
	}})
	// Drain everything: a denial only means the two shards drawn were
	// empty, so keep going until the whole limit is.
	for i := 0; value(t, l, "s", "").Value > 0; i++ {
		if i > 10_000 {
			t.Fatal("could not drain the limit")
		}
		if _, err := l.Limit(ctx, Request{Name: "s", Count: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if v := value(t, l, "s", "").Value; v != 0 {
		t.Fatalf("drained: %v", v)
	}
	if err := l.Credit(ctx, "s", "", 6); err != nil {
		t.Fatal(err)
	}
	shards := shardValues(t, l, "s", "")
	for i, v := range shards { // 6 over 4 empty shards: 1.5 each
		if v != 1.5 {
			t.Fatalf("shard %d = %v, want 1.5 (all %v)", i, v, shards)
		}
	}
	if err := l.Credit(ctx, "s", "", 100); err != nil {
		t.Fatal(err)
	}
	if v := value(t, l, "s", "").Value; v != 40 {
		t.Fatalf("credit capped: %v, want 40", v)
	}
}

// Credits racing on a sharded limit lose nothing to a shard's cap while
// the limit has room: what a shard filled by a racing credit refuses is
// spread again, so crediting exactly what was taken fills the limit.
func TestCreditShardedRacingCreditsAllLand(t *testing.T) {
	clk := newClock()
	ctx := context.Background()
	const credits, each = 16, 25.0
	for round := range 5 {
		path := filepath.Join(t.TempDir(), "rl.db") // commits keep credits in flight together
		l := open(t, Options{Path: path, Now: clk.Now, Partitions: 4, Limits: map[string]Config{
			"s": {Kind: TokenBucket, Rate: credits * each, Period: time.Hour, Shards: 4},
		}})
		for i := 0; value(t, l, "s", "k").Value > 0; i++ { // empty every shard
			if i > 10_000 {
				t.Fatal("could not drain the limit")
			}
			if _, err := l.Limit(ctx, Request{Name: "s", Key: "k", Count: 5}); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		for range credits {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := l.Credit(ctx, "s", "k", each); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if v := value(t, l, "s", "k").Value; math.Abs(v-credits*each) > 1e-9 {
			t.Fatalf("round %d: %d credits of %v over an empty limit of %v: value %v (shards %v)",
				round, credits, each, credits*each, v, shardValues(t, l, "s", "k"))
		}
		l.Close()
	}
}

// fillEmptiest water-fills shards of unequal values: the emptiest rise
// together, none above capacity, debt included.
func TestFillEmptiestUnequal(t *testing.T) {
	for _, c := range []struct {
		vals   []float64
		credit float64
		want   []float64
	}{
		{[]float64{0, 2, 5, 10}, 4, []float64{3, 3, 5, 10}},
		{[]float64{5, 0, 2}, 1, []float64{5, 1, 2}},
		{[]float64{5, 0, 2}, 12, []float64{19.0 / 3, 19.0 / 3, 19.0 / 3}},
		{[]float64{9, 9}, 100, []float64{10, 10}},
		{[]float64{-4, 3}, 3, []float64{-1, 3}},
	} {
		amounts := fillEmptiest(c.vals, 10, c.credit)
		for i := range c.vals {
			if got := c.vals[i] + amounts[i]; got != c.want[i] {
				t.Errorf("%v + %v: shard %d = %v, want %v", c.vals, c.credit, i, got, c.want[i])
			}
		}
	}
}

// Credit with a canceled context fails with the context's error and gives
// nothing back, sharded or not (TestCanceledContext covers the other
// methods).
func TestCanceledContextCredit(t *testing.T) {
	clk := newClock()
	sh := tb(40, time.Minute)
	sh.Shards = 4
	l := open(t, Options{Now: clk.Now, Limits: map[string]Config{"a": tb(10, time.Minute), "sh": sh}})
	ctx := context.Background()
	_, _ = l.Limit(ctx, Request{Name: "a", Key: "k", Count: 10})
	_, _ = l.Limit(ctx, Request{Name: "sh", Key: "k", Count: 20})
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	for _, n := range []string{"a", "sh"} {
		if err := l.Credit(canceled, n, "k", 5); !errors.Is(err, context.Canceled) {
			t.Errorf("Credit(%s) canceled: %v", n, err)
		}
	}
	if v := value(t, l, "a", "k").Value; v != 0 {
		t.Errorf("a = %v", v)
	}
	if v := value(t, l, "sh", "k").Value; v != 20 {
		t.Errorf("sh = %v", v)
	}
}

// A credit whose context ends while its commit is under way is still
// waited for: Credit's answer says whether the tokens were given back, so
// a caller told it failed can retry without crediting twice.
func TestCanceledCreditAnswersItsOutcome(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rl.db")
	clk := newClock()
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	var armed atomic.Bool
	l := open(t, Options{Path: path, Limits: durableLimits, Now: clk.Now, beforeCommit: func(uint64) error {
		if armed.CompareAndSwap(true, false) {
			cancel() // the credit's context ends during its commit
		}
		return nil
	}})
	limit(t, l, Request{Name: "tb", Key: "k", Count: 10})
	armed.Store(true)
	creditErr := l.Credit(ctx, "tb", "k", 4)
	if armed.Load() {
		t.Fatal("the credit's commit never ran")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if creditErr != nil {
		t.Fatalf("Credit committed, but returned %v", creditErr)
	}
	l = open(t, Options{Path: path, Limits: durableLimits, Now: clk.Now})
	if v := value(t, l, "tb", "k").Value; v != 4 {
		t.Errorf("tb/k = %v after a Credit of 4 that returned nil, want 4", v)
	}
}

// Jitter spreads a wait uniformly over [d, d+spread) and saturates near
// the largest Duration.
func TestJitter(t *testing.T) {
	if Jitter(time.Second, 0) != time.Second {
		t.Fatal("no spread, no jitter")
	}
	seen := map[bool]bool{}
	for i := 0; i < 1000; i++ {
		j := Jitter(time.Second, time.Second)
		if j < time.Second || j >= 2*time.Second {
			t.Fatalf("Jitter = %v, outside [1s, 2s)", j)
		}
		seen[j < 1500*time.Millisecond] = true
	}
	if len(seen) != 2 {
		t.Fatal("jitter does not spread over the interval")
	}
	for range 100 { // near the largest Duration it saturates, never wraps
		if j := Jitter(math.MaxInt64-10, time.Hour); j < math.MaxInt64-10 {
			t.Fatalf("Jitter(MaxInt64-10, 1h) = %v", j)
		}
	}
}

// A credit that resolves another inline config of the name (Credit takes
// the name's latest) is seen by Limit and LimitAll under the first
// config, also once the bucket's denial has been repeated often enough to
// be answered without its partition's mutex.
func TestCreditUnderAnotherInlineConfigIsSeen(t *testing.T) {
	for _, all := range []bool{false, true} {
		t.Run(map[bool]string{false: "Limit", true: "LimitAll"}[all], func(t *testing.T) {
			clk := newClock()
			l := open(t, Options{Now: clk.Now, Limits: map[string]Config{"y": {Kind: TokenBucket, Rate: 10, Period: time.Hour}}})
			a := &Config{Kind: TokenBucket, Rate: 1, Period: time.Hour}
			b := &Config{Kind: TokenBucket, Rate: 1, Period: time.Hour, MaxReserved: 5}
			for i := range 6 { // one grant, then denials enough to be repeated without the mutex
				if st := limit(t, l, Request{Name: "x", Key: "k", Config: a}); st.OK != (i == 0) {
					t.Fatalf("take %d: %+v", i, st)
				}
			}
			limit(t, l, Request{Name: "x", Key: "other", Config: b}) // b is now x's latest inline config
			if err := l.Credit(bg, "x", "k", 1); err != nil {
				t.Fatal(err)
			}
			var st Status
			if all {
				var err error
				if st, err = l.LimitAll(bg, Request{Name: "x", Key: "k", Config: a}, Request{Name: "y", Key: "u"}); err != nil {
					t.Fatal(err)
				}
			} else {
				st = limit(t, l, Request{Name: "x", Key: "k", Config: a})
			}
			if !st.OK {
				t.Errorf("after a credit of 1: %+v, want granted", st)
			}
		})
	}
}
