package ratelimitprom

// Helpers shared by the package's tests.

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/seed7fbd42b6/ratelimit"
	"github.com/seed7fbd42b6/ratelimit/ratelimittest"
)

// open opens a limiter with one limit, "api", on a frozen clock, closed
// when t ends.
func open(t *testing.T, path string) *ratelimit.Limiter {
	t.Helper()
	l, err := ratelimit.Open(ratelimit.Options{
		Path:       path,
		Partitions: 4,
		Limits: map[string]ratelimit.Config{
			"api": {Kind: ratelimit.TokenBucket, Rate: 2, Period: time.Minute},
		},
		Now: ratelimittest.NewClock(time.Unix(1_700_000_000, 0)).Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// use makes 2 grants, 1 reservation and 2 denials on key "k".
func use(t *testing.T, l *ratelimit.Limiter) {
	t.Helper()
	ctx := context.Background()
	for _, r := range []ratelimit.Request{{}, {}, {Reserve: true}, {}, {}} {
		r.Name, r.Key = "api", "k"
		if _, err := l.Limit(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
}

// gather scrapes reg: each metric family by name.
func gather(t *testing.T, reg *prometheus.Registry) map[string][]*dto.Metric {
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
