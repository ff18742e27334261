package ratelimit

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"testing"
	"time"
)

func TestCredit(t *testing.T) {
	clk := newFakeClock()
	ctx := context.Background()
	l := openDurable(t, filepath.Join(t.TempDir(), "rl.db"), clk, nil)
	mustLimit(t, l, Request{Name: "tb", Key: "u", Count: 8})
	if err := l.Credit(ctx, "tb", "u", 3); err != nil {
		t.Fatal(err)
	}
	if v := mustValue(t, l, "tb", "u"); v != 5 {
		t.Fatalf("after credit 3: %v, want 5", v)
	}
	if err := l.Credit(ctx, "tb", "u", 100); err != nil {
		t.Fatal(err)
	}
	if v := mustValue(t, l, "tb", "u"); v != 10 {
		t.Fatalf("credit is capped at capacity: %v, want 10", v)
	}
	// A reservation's debt can be credited back.
	mustLimit(t, l, Request{Name: "tb", Key: "debt", Count: 30, Reserve: true})
	if err := l.Credit(ctx, "tb", "debt", 15); err != nil {
		t.Fatal(err)
	}
	if v := mustValue(t, l, "tb", "debt"); v != -5 {
		t.Fatalf("debt after credit: %v, want -5", v)
	}
	for _, bad := range []float64{-1, nan(), inf()} {
		if err := l.Credit(ctx, "tb", "debt", bad); !errors.Is(err, ErrInvalidCount) {
			t.Fatalf("Credit(%v): %v", bad, err)
		}
	}
	if err := l.Credit(ctx, "nope", "", 1); !errors.Is(err, ErrUnknownLimit) {
		t.Fatalf("unknown: %v", err)
	}
	// Durable like any grant.
	l.Close()
	l = openDurable(t, filepath.Join(filepath.Dir(l.opts.Path), "rl.db"), clk, nil)
	defer l.Close()
	if v := mustValue(t, l, "tb", "debt"); v != -5 {
		t.Fatalf("credit after reopen: %v, want -5", v)
	}
}

// A sharded credit fills the emptiest shards first (water-filling).
func TestCreditShardedFillsEmptiest(t *testing.T) {
	clk := newFakeClock()
	ctx := context.Background()
	l, err := Open(Options{Now: clk.Now, Limits: map[string]Config{
		"s": {Kind: TokenBucket, Rate: 40, Period: time.Hour, Shards: 4},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// Drain everything: a denial only means the two shards drawn were
	// empty, so keep going until the whole limit is.
	for i := 0; mustValue(t, l, "s", "") > 0; i++ {
		if i > 10_000 {
			t.Fatal("could not drain the limit")
		}
		if _, err := l.Limit(ctx, Request{Name: "s", Count: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if v := mustValue(t, l, "s", ""); v != 0 {
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
	if v := mustValue(t, l, "s", ""); v != 40 {
		t.Fatalf("credit capped: %v, want 40", v)
	}
}

func TestStatsAndStatusFigures(t *testing.T) {
	clk := newFakeClock()
	ctx := context.Background()
	l := openDurable(t, filepath.Join(t.TempDir(), "rl.db"), clk, nil)
	defer l.Close()
	s := mustLimit(t, l, Request{Name: "tb", Key: "u", Count: 4})
	if !s.OK || s.Remaining != 6 || s.ResetAfter != 24*time.Second {
		t.Fatalf("grant status %+v, want remaining 6, reset 24s", s)
	}
	s = mustLimit(t, l, Request{Name: "tb", Key: "u", Count: 7})
	if s.OK || s.Remaining != 6 || s.RetryAfter != 6*time.Second {
		t.Fatalf("denial status %+v", s)
	}
	s = mustLimit(t, l, Request{Name: "tb", Key: "u", Count: 8, Reserve: true})
	if !s.OK || s.Remaining != -2 || s.RetryAfter != 12*time.Second || s.ResetAfter != 72*time.Second {
		t.Fatalf("reservation status %+v", s)
	}
	all, err := l.LimitAll(ctx, Request{Name: "tb", Key: "v", Count: 1}, Request{Name: "fw", Key: "v", Count: 9})
	if err != nil || !all.OK || all.Remaining != 1 || all.Limit != "tb" && all.Remaining != 1 {
		t.Fatalf("LimitAll status %+v %v", all, err)
	}
	if err := l.Snapshot(); err != nil {
		t.Fatal(err)
	}
	st := l.Stats()
	if st.Grants != 3 || st.Denials != 1 || st.Reservations != 1 || st.LiveBuckets != 3 || st.Snapshots != 1 {
		t.Fatalf("stats %+v", st)
	}
	if st.WALCommits == 0 || st.WALRecords < 4 || st.WALBatchRecords.Count() != st.WALCommits || st.WALCommitNanos.Quantile(0.5) == 0 ||
		st.WALCommitTime <= 0 || st.WALCommitTime >= time.Duration(st.WALCommitNanos.Quantile(1))*time.Duration(st.WALCommits) {
		t.Fatalf("wal stats %+v", st)
	}
}

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
