package ratelimitprom

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/seed7fbd42b6/ratelimit"
)

func open(t *testing.T, path string) *ratelimit.Limiter {
	t.Helper()
	now := time.Unix(1_700_000_000, 0)
	l, err := ratelimit.Open(ratelimit.Options{
		Path:       path,
		Partitions: 4,
		Limits: map[string]ratelimit.Config{
			"api": {Kind: ratelimit.TokenBucket, Rate: 2, Period: time.Minute},
		},
		Now: func() time.Time { return now },
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
# HELP ratelimit_too_many_keys_total Requests refused with ErrTooManyKeys: they needed a new bucket while the limiter held Options.MaxBuckets.
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
