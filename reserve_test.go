package ratelimit

// Reservations (Request.Reserve): debt, MaxReserved and its bounds.

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"testing"
	"time"
)

// The worked cases of reservations: debt, repayment, and MaxReserved
// bounding the debt, for token buckets and fixed windows.
func TestReserveWorkedCases(t *testing.T) {
	fwT0 := fw(10, M, t0)
	runWorkedCases(t, []workedCase{
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
	})
}

// A reservation with a large but finite, accepted count (maxReserved unset
// = unlimited) whose debt would leave float64's range is denied, and the
// bucket repays: a debt of -Inf would turn the bucket NaN at the next
// refill (-Inf + Inf), for good.
func TestDebtBeyondFloat64Refused(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	path := filepath.Join(t.TempDir(), "rl.db")
	limits := map[string]Config{"hot": tb(1e308, 1)} // 1e308 tokens per ns, capacity 1e308
	l := open(t, Options{Path: path, Now: clk.Now, Limits: limits})
	for i := 0; i < 2; i++ {
		st, err := l.Limit(ctx, Request{Name: "hot", Key: "k", Count: 1.7e308, Reserve: true})
		if err != nil {
			if errors.Is(err, ErrInvalidCount) {
				return // refusing it would be fine
			}
			t.Fatal(err)
		}
		t.Logf("reserve 1.7e308 #%d: %+v", i+1, st)
	}
	clk.Advance(time.Hour) // far beyond any repayment time
	_ = l.Credit(ctx, "hot", "k", 1)
	v := value(t, l, "hot", "k")
	st, err := l.Limit(ctx, Request{Name: "hot", Key: "k", Count: 1})
	if math.IsNaN(v.Value) || math.IsInf(v.Value, 0) || err != nil || !st.OK {
		t.Errorf("an hour later (debt repaid in ns): Value = %v, Limit(1) = %+v, %v; want a finite value and a grant", v.Value, st, err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = open(t, Options{Path: path, Now: clk.Now, Limits: limits})
	if v := value(t, l, "hot", "k"); math.IsNaN(v.Value) {
		t.Errorf("after reopening, Value = NaN: the poisoned state was made durable")
	}
}

// Config.MaxReserved is split over shards (MaxReserved / Shards). A
// subnormal MaxReserved that the split would round to 0, which per shard
// means "unlimited", is ErrInvalidConfig, as the same underflow of
// Capacity or Rate is: a (tiny) debt bound must not accept reservations of
// any size.
func TestSubnormalMaxReservedPerShard(t *testing.T) {
	clk := newClock()
	cfg := tb(10, time.Minute)
	cfg.MaxReserved = 5e-324 // the smallest positive float64: valid ("finite, >= 0")
	cfg.Shards = 2
	if _, err := Open(Options{Now: clk.Now, Limits: map[string]Config{"sub": cfg}}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("maxReserved 5e-324 over 2 shards: Open = %v, want ErrInvalidConfig", err)
	}
	cfg.Shards = 1 // unsplit it stays a (tiny) bound
	l := open(t, Options{Now: clk.Now, Limits: map[string]Config{"sub": cfg}})
	if _, err := l.Limit(context.Background(), Request{Name: "sub", Key: "k", Count: 1000, Reserve: true}); !errors.Is(err, ErrInvalidCount) {
		t.Fatalf("reserve 1000 with capacity 10, maxReserved 5e-324: %v, want ErrInvalidCount", err)
	}
}
