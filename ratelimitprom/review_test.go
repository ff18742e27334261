package ratelimitprom

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/seed7fbd42b6/ratelimit"
)

func rvGather(t *testing.T, reg *prometheus.Registry) map[string][]*dto.Metric {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]*dto.Metric{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf.GetMetric()
	}
	return out
}

// TestReviewMetricsMatchStats: after LimitAll calls spread over partitions
// (one decision each), reservations and denials, every counter equals the
// limiter's Stats, and a LimitAll counts once.
func TestReviewMetricsMatchStats(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	l, err := ratelimit.Open(ratelimit.Options{
		Partitions: 16,
		Limits: map[string]ratelimit.Config{
			"a": {Kind: ratelimit.TokenBucket, Rate: 2, Period: time.Minute, MaxReserved: 1},
			"b": {Kind: ratelimit.TokenBucket, Rate: 100, Period: time.Minute},
		},
		Now: func() time.Time { return now },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	// 2 grants, 1 reservation (a grant), 1 denial: all LimitAll over two keys.
	for _, reserve := range []bool{false, false, true, true} {
		if _, err := l.LimitAll(ctx,
			ratelimit.Request{Name: "a", Key: "k", Reserve: reserve},
			ratelimit.Request{Name: "b", Key: "other-key", Reserve: reserve}); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector(l, "rl"))
	m := rvGather(t, reg)
	s := l.Stats()
	got := map[string]float64{}
	for _, x := range m["rl_decisions_total"] {
		got[x.GetLabel()[0].GetValue()] = x.GetCounter().GetValue()
	}
	if got["granted"] != float64(s.Grants) || got["denied"] != float64(s.Denials) || s.Grants != 3 || s.Denials != 1 {
		t.Errorf("decisions %v, Stats %+v; want 3 granted, 1 denied", got, s)
	}
	if r := m["rl_reservations_total"][0].GetCounter().GetValue(); r != float64(s.Reservations) || r != 1 {
		t.Errorf("reservations %v, Stats %d", r, s.Reservations)
	}
	if v := m["rl_live_buckets"][0].GetGauge().GetValue(); v != float64(s.LiveBuckets) || v != 2 {
		t.Errorf("live %v, Stats %d", v, s.LiveBuckets)
	}
	if v := m["rl_partitions"][0].GetGauge().GetValue(); v != 16 {
		t.Errorf("partitions %v", v)
	}
}

// TestReviewRegistrationCollision: two collectors under one namespace collide
// with an error (not a panic); distinct namespaces coexist; the empty
// namespace gives bare names.
func TestReviewRegistrationCollision(t *testing.T) {
	l1, l2 := open(t, ""), open(t, "")
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(NewCollector(l1, "x")); err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(NewCollector(l2, "x")); err == nil {
		t.Error("two collectors with one namespace registered")
	}
	if err := reg.Register(NewCollector(l2, "y")); err != nil {
		t.Errorf("distinct namespace: %v", err)
	}
	reg2 := prometheus.NewPedanticRegistry()
	reg2.MustRegister(NewCollector(l1, ""))
	if _, ok := rvGather(t, reg2)["decisions_total"]; !ok {
		t.Error("no bare decisions_total")
	}
}

// TestReviewConcurrentScrapes: scrapes racing with traffic and Close (-race).
func TestReviewConcurrentScrapes(t *testing.T) {
	l := open(t, "")
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector(l, "c"))
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 50 {
				l.Limit(context.Background(), ratelimit.Request{Name: "api", Key: string(rune('a' + (i+j)%5))})
			}
		}()
	}
	for range 20 {
		if _, err := reg.Gather(); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	l.Close()
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
}
