package engine

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed7fbd42b6/ratelimit"
	"github.com/seed7fbd42b6/ratelimit/cmd/ratelimitd/internal/config"
)

// t0 is a whole hour, so fixed windows of a second to an hour start there.
var t0 = time.Date(2030, 1, 1, 10, 0, 0, 0, time.UTC)

// clock is a settable clock.
type clock struct{ ns atomic.Int64 }

func newClock(t time.Time) *clock {
	c := new(clock)
	c.set(t)
	return c
}
func (c *clock) now() time.Time          { return time.Unix(0, c.ns.Load()).UTC() }
func (c *clock) set(t time.Time)         { c.ns.Store(t.UnixNano()) }
func (c *clock) advance(d time.Duration) { c.ns.Add(int64(d)) }
func parseConfig(t *testing.T, src string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]config.File{{Name: "t.yaml", Data: []byte(src)}}, nil)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return cfg
}

// fixture is an engine on an in-memory limiter with a settable clock.
type fixture struct {
	t     *testing.T
	e     *Engine
	lim   *ratelimit.Limiter
	clock *clock
}

func newFixture(t *testing.T, src string, opts Options) *fixture {
	t.Helper()
	cfg := parseConfig(t, src)
	c := newClock(t0)
	lim, err := ratelimit.Open(ratelimit.Options{Limits: cfg.LimiterConfigs(), Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lim.Close() })
	opts.Now = c.now
	return &fixture{t: t, e: New(lim, cfg, opts), lim: lim, clock: c}
}

// desc builds a descriptor from "k=v" entries and hits.
func desc(hits uint64, kvs ...string) Descriptor {
	d := Descriptor{Hits: hits}
	for _, kv := range kvs {
		k, v, _ := strings.Cut(kv, "=")
		d.Entries = append(d.Entries, config.Entry{Key: k, Value: v})
	}
	return d
}

// decide decides a request of descriptors in domain, failing on an error.
func (f *fixture) decide(domain string, ds ...Descriptor) *Result {
	f.t.Helper()
	res, err := f.try(&Request{Domain: domain, Descriptors: ds})
	if err != nil {
		f.t.Fatalf("Decide: %v", err)
	}
	return res
}

func (f *fixture) try(r *Request) (*Result, error) {
	res := new(Result)
	err := f.e.Decide(context.Background(), r, res)
	return res, err
}

// remaining is what a check (hits 0) of one descriptor reports.
func (f *fixture) remaining(domain string, kvs ...string) float64 {
	f.t.Helper()
	return f.decide(domain, desc(0, kvs...)).Statuses[0].Remaining
}

// codes lists a result's overall code then each status's code.
func codes(r *Result) []Code {
	out := []Code{r.Code}
	for _, st := range r.Statuses {
		out = append(out, st.Code)
	}
	return out
}
