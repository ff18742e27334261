package config

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/seed7fbd42b6/ratelimit"
)

// Every rule's Config is one ratelimit.Open accepts.
func TestLimiterConfigsOpen(t *testing.T) {
	c, err := Load("testdata/parity.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	ext := parse(t, doc("domain: ext", "descriptors:",
		"  - key: tb",
		"    rate_limit: {algorithm: token_bucket, period: 90s, requests_per_unit: 3, capacity: 9, max_reserved: 2, shards: 4}",
		"  - key: fw",
		"    rate_limit: {period: 250ms, requests_per_unit: 1}"))
	limits := c.LimiterConfigs()
	for name, cfg := range ext.LimiterConfigs() {
		limits[name] = cfg
	}
	// the 21 counting rules of parity.yaml, and the two above
	if len(limits) != 23 {
		t.Errorf("%d limiter configs: %v", len(limits), limits)
	}
	l, err := ratelimit.Open(ratelimit.Options{Limits: limits})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// A unit-based rule is a fixed window aligned to the Unix epoch, as
// envoyproxy/ratelimit counts: the same traffic gets the same answers.
func TestFixedWindowsAlignToEpoch(t *testing.T) {
	c := parse(t, doc("domain: d", "descriptors:", "  - key: k", "    rate_limit: {unit: minute, requests_per_unit: 3}"))
	var mu sync.Mutex
	now := time.Unix(1_700_000_000, 0) // 20 s into a minute since the epoch
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	set := func(t time.Time) { mu.Lock(); defer mu.Unlock(); now = t }
	l, err := ratelimit.Open(ratelimit.Options{Limits: c.LimiterConfigs(), Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	m, _ := limitFor(t, c, "d", "k=user1")
	req := ratelimit.Request{Name: m.Limit.Name, Key: m.Key}
	ctx := context.Background()
	for i, step := range []struct {
		at time.Time
		ok bool
	}{
		{time.Unix(1_700_000_000, 0), true},
		{time.Unix(1_700_000_010, 0), true},
		{time.Unix(1_700_000_039, 0), true},
		{time.Unix(1_700_000_039, 0), false},
		{time.Unix(1_700_000_040, 0), true}, // a new minute since the epoch
	} {
		set(step.at)
		st, err := l.Limit(ctx, req)
		if err != nil || st.OK != step.ok {
			t.Errorf("step %d at %v: %+v, %v; want ok = %v", i, step.at.Unix()%60, st, err, step.ok)
		}
	}
}
