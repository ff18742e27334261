package ratelimitprom

// The collector (collector.go): its metrics equal the limiter's Stats, in
// memory and durable mode, after Close, under concurrent scrapes.

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/seed7fbd42b6/ratelimit"
	"github.com/seed7fbd42b6/ratelimit/ratelimittest"
)

func TestCollectorCounters(t *testing.T) {
	l := open(t, "")
	use(t, l)
	c := NewCollector(l, "ratelimit")
	want := `
# HELP ratelimit_decisions_total Rate-limit decisions since the limiter opened, by outcome (a LimitAll call is one decision).
# TYPE ratelimit_decisions_total counter
ratelimit_decisions_total{outcome="denied"} 2
ratelimit_decisions_total{outcome="granted"} 3
# HELP ratelimit_reservations_total Grants that were reservations that must wait (RetryAfter > 0).
# TYPE ratelimit_reservations_total counter
ratelimit_reservations_total 1
# HELP ratelimit_errors_total Requests answered with ErrUnavailable (the write-ahead log failed).
# TYPE ratelimit_errors_total counter
ratelimit_errors_total 0
# HELP ratelimit_too_many_keys_total Requests refused with ErrTooManyKeys: they needed new buckets beyond their partition's share of Options.MaxBuckets.
# TYPE ratelimit_too_many_keys_total counter
ratelimit_too_many_keys_total 0
# HELP ratelimit_live_buckets Buckets held in memory (buckets that are not full).
# TYPE ratelimit_live_buckets gauge
ratelimit_live_buckets 1
# HELP ratelimit_partitions Actor partitions.
# TYPE ratelimit_partitions gauge
ratelimit_partitions 4
# HELP ratelimit_wal_commits_total Write-ahead log group commits.
# TYPE ratelimit_wal_commits_total counter
ratelimit_wal_commits_total 0
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want),
		"ratelimit_decisions_total", "ratelimit_reservations_total", "ratelimit_errors_total", "ratelimit_too_many_keys_total",
		"ratelimit_live_buckets", "ratelimit_partitions", "ratelimit_wal_commits_total"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(c); n != 15 { // 14 metrics, decisions twice
		t.Fatalf("%d metrics, want 15", n)
	}
	problems, err := testutil.CollectAndLint(c)
	if err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
}

// TestCollectorWAL: in durable mode, the commit histograms agree with the
// counters: count = commits, records sum = records, cumulative buckets.
func TestCollectorWAL(t *testing.T) {
	l := open(t, filepath.Join(t.TempDir(), "rl.db"))
	use(t, l)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector(l, "rl"))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*dto.Metric{}
	for _, mf := range mfs {
		byName[mf.GetName()] = mf.GetMetric()[0]
	}
	commits := byName["rl_wal_commits_total"].GetCounter().GetValue()
	records := byName["rl_wal_records_total"].GetCounter().GetValue()
	if commits < 1 || records != 3 || byName["rl_wal_bytes_total"].GetCounter().GetValue() <= 0 {
		t.Fatalf("commits %v records %v (want 3: the grants and the reservation)", commits, records)
	}
	for _, name := range []string{"rl_wal_commit_records", "rl_wal_commit_duration_seconds"} {
		h := byName[name].GetHistogram()
		if float64(h.GetSampleCount()) != commits {
			t.Errorf("%s: count %d, want %v", name, h.GetSampleCount(), commits)
		}
		var prev uint64
		for _, b := range h.GetBucket() {
			if b.GetCumulativeCount() < prev {
				t.Errorf("%s: not cumulative at le=%v", name, b.GetUpperBound())
			}
			prev = b.GetCumulativeCount()
		}
		if prev != h.GetSampleCount() {
			t.Errorf("%s: last bucket %d, count %d", name, prev, h.GetSampleCount())
		}
	}
	if s := byName["rl_wal_commit_records"].GetHistogram().GetSampleSum(); s != records {
		t.Errorf("records histogram sum %v, want %v", s, records)
	}
	// The duration sum is the library's, not an estimate from the buckets.
	// Stats is read after the scrape, and nothing was committed since.
	if s, want := byName["rl_wal_commit_duration_seconds"].GetHistogram().GetSampleSum(), l.Stats().WALCommitTime.Seconds(); s != want || s <= 0 {
		t.Errorf("commit duration sum %v, want %v", s, want)
	}
}

func TestHistogramBuckets(t *testing.T) {
	var h ratelimit.Histogram
	h.Counts[0] = 1  // 0
	h.Counts[1] = 2  // 1
	h.Counts[3] = 4  // 4..7
	h.Counts[5] = 1  // 16..31, above the last exported bucket: only in +Inf
	h.Counts[63] = 1 // the overflow bucket
	d := prometheus.NewDesc("h", "test", nil, nil)
	var m dto.Metric
	if err := histogram(d, h, 0, 4, 1, 42).Write(&m); err != nil {
		t.Fatal(err)
	}
	got := map[float64]uint64{}
	for _, b := range m.GetHistogram().GetBucket() {
		got[b.GetUpperBound()] = b.GetCumulativeCount()
	}
	want := map[float64]uint64{0: 1, 1: 3, 3: 3, 7: 7, 15: 7}
	if len(got) != len(want) {
		t.Fatalf("buckets %v, want %v", got, want)
	}
	for le, n := range want {
		if got[le] != n {
			t.Errorf("le=%v: %d, want %d (all %v)", le, got[le], n, got)
		}
	}
	if c, s := m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum(); c != 9 || s != 42 {
		t.Errorf("count %d, sum %v; want 9, 42 (the sum given)", c, s)
	}

	var ns dto.Metric // scaled to seconds: bucket 10 is [512, 1024) ns
	if err := histogram(d, h, 10, 10, 1e-9, 5).Write(&ns); err != nil {
		t.Fatal(err)
	}
	if b := ns.GetHistogram().GetBucket()[0]; b.GetUpperBound() != 1023e-9 || b.GetCumulativeCount() != 8 {
		t.Errorf("scaled bucket: le=%v count=%d", b.GetUpperBound(), b.GetCumulativeCount())
	}
}

// TestCollectAfterClose: a registry may scrape a limiter that was closed;
// the collector must neither hang nor panic.
func TestCollectAfterClose(t *testing.T) {
	l := open(t, "")
	l.Close()
	done := make(chan int)
	go func() { done <- testutil.CollectAndCount(NewCollector(l, "x")) }()
	select {
	case n := <-done:
		if n != 15 {
			t.Fatalf("%d metrics after Close, want 15", n)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("Stats hangs after Close")
	}
}

// TestMetricsMatchStats: after LimitAll calls spread over partitions
// (one decision each), reservations and denials, every counter equals the
// limiter's Stats, and a LimitAll counts once.
func TestMetricsMatchStats(t *testing.T) {
	l, err := ratelimit.Open(ratelimit.Options{
		Partitions: 16,
		Limits: map[string]ratelimit.Config{
			"a": {Kind: ratelimit.TokenBucket, Rate: 2, Period: time.Minute, MaxReserved: 1},
			"b": {Kind: ratelimit.TokenBucket, Rate: 100, Period: time.Minute},
		},
		Now: ratelimittest.NewClock(time.Unix(1_700_000_000, 0)).Now,
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
	m := gather(t, reg)
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

// TestRegistrationCollision: two collectors under one namespace collide
// with an error (not a panic); distinct namespaces coexist; the empty
// namespace gives bare names.
func TestRegistrationCollision(t *testing.T) {
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
	if _, ok := gather(t, reg2)["decisions_total"]; !ok {
		t.Error("no bare decisions_total")
	}
}

// A collector of a nil limiter fails every scrape with an error, never a
// panic (a registry collects in goroutines of its own: a panic there would
// end the process).
func TestNilLimiter(t *testing.T) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(NewCollector(nil, "x")); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Gather(); err == nil || !strings.Contains(err.Error(), "nil *ratelimit.Limiter") {
		t.Fatalf("Gather: %v, want the nil limiter's error", err)
	}
}

// TestConcurrentScrapes: scrapes racing with traffic and Close (-race).
func TestConcurrentScrapes(t *testing.T) {
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
