package main

import (
	"testing"
	"time"
)

// Quantiles are by nearest rank, ceil(q*n): the p91 of 1..20 is 19 and the
// p99 of 1..60 is 60 (rounding q*n instead gives 18 and 59).
func TestQuantilesByNearestRank(t *testing.T) {
	var h hist
	h.reset()
	for v := 1; v <= 20; v++ {
		h.record(time.Duration(v))
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 10}, {0.91, 19}, {0.95, 19}, {1, 20}, {0.01, 1}} {
		if got := h.quantile(c.q); got != c.want {
			t.Errorf("hist: q%v of 1..20 = %v, want %v", c.q, got, c.want)
		}
	}
	var sorted []time.Duration
	for v := 1; v <= 60; v++ {
		sorted = append(sorted, time.Duration(v))
	}
	if got := nearestRank(sorted, 0.99); got != 60 {
		t.Errorf("nearestRank: p99 of 1..60 = %v, want 60", got)
	}
	if got := nearestRank(sorted, 0.5); got != 30 {
		t.Errorf("nearestRank: p50 of 1..60 = %v, want 30", got)
	}
}
