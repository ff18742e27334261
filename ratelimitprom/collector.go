// Package ratelimitprom exports a ratelimit.Limiter's Stats to Prometheus.
//
// It is its own module, so that users of package ratelimit who do not use
// Prometheus do not depend on github.com/prometheus/client_golang.
//
//	reg.MustRegister(ratelimitprom.NewCollector(l, "ratelimit"))
//
// With namespace "ratelimit", the metrics are:
//
//	ratelimit_decisions_total{outcome="granted"|"denied"}  counter
//	ratelimit_reservations_total                           counter (grants that must wait)
//	ratelimit_errors_total                                 counter (ErrUnavailable answers)
//	ratelimit_too_many_keys_total                          counter (ErrTooManyKeys answers)
//	ratelimit_live_buckets                                 gauge
//	ratelimit_partitions                                   gauge
//	ratelimit_wal_commits_total                            counter
//	ratelimit_wal_failed_commits_total                     counter
//	ratelimit_wal_records_total                            counter
//	ratelimit_wal_bytes_total                              counter
//	ratelimit_wal_commit_records                           histogram (records per commit)
//	ratelimit_wal_commit_duration_seconds                  histogram (fsync included)
//	ratelimit_snapshots_total                              counter
//	ratelimit_snapshot_age_seconds                         gauge
//
// The WAL metrics are zero in memory mode. Each scrape calls
// Limiter.Stats once, which visits every partition.
package ratelimitprom

import (
	"errors"
	"math"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/seed7fbd42b6/ratelimit"
)

// Histogram bucket ranges exported, as indexes into ratelimit.Histogram
// (bucket i counts integers in [2^(i-1), 2^i), so its upper bound is
// 2^i - 1). Fixed, so the series stay the same from scrape to scrape;
// anything above the last bound is in the +Inf bucket.
const (
	recordsFirst, recordsLast = 0, 16  // 0 .. 65535 records per commit
	nanosFirst, nanosLast     = 10, 36 // ~1 µs .. ~69 s
)

// NewCollector returns a collector of l's Stats with metric names prefixed
// by namespace (for example "ratelimit"; "" for none). Register it with a
// prometheus.Registerer. With a nil l every collection fails with an
// error (a scrape then reports it) rather than a panic.
func NewCollector(l *ratelimit.Limiter, namespace string) prometheus.Collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(namespace, "", name), help, labels, nil)
	}
	return &collector{
		l:             l,
		decisions:     d("decisions_total", "Rate-limit decisions since the limiter opened, by outcome (a LimitAll call is one decision).", "outcome"),
		reservations:  d("reservations_total", "Grants that were reservations that must wait (RetryAfter > 0)."),
		errors:        d("errors_total", "Requests answered with ErrUnavailable (the write-ahead log failed)."),
		tooManyKeys:   d("too_many_keys_total", "Requests refused with ErrTooManyKeys: they needed new buckets beyond their partition's share of Options.MaxBuckets."),
		live:          d("live_buckets", "Buckets held in memory (buckets that are not full)."),
		partitions:    d("partitions", "Actor partitions."),
		walCommits:    d("wal_commits_total", "Write-ahead log group commits."),
		walFailed:     d("wal_failed_commits_total", "Write-ahead log commits that failed."),
		walRecords:    d("wal_records_total", "Records written to the write-ahead log."),
		walBytes:      d("wal_bytes_total", "Bytes written to the write-ahead log."),
		batchRecords:  d("wal_commit_records", "Records per write-ahead log commit."),
		commitSeconds: d("wal_commit_duration_seconds", "Write-ahead log commit latency, fsync included."),
		snapshots:     d("snapshots_total", "Snapshots written since the limiter opened."),
		snapshotAge:   d("snapshot_age_seconds", "Time since the last snapshot, or since open if none."),
	}
}

var errNilLimiter = errors.New("ratelimitprom: NewCollector was given a nil *ratelimit.Limiter")

type collector struct {
	l *ratelimit.Limiter

	decisions, reservations, errors, tooManyKeys, live, partitions,
	walCommits, walFailed, walRecords, walBytes,
	batchRecords, commitSeconds, snapshots, snapshotAge *prometheus.Desc
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.decisions, c.reservations, c.errors, c.tooManyKeys, c.live, c.partitions,
		c.walCommits, c.walFailed, c.walRecords, c.walBytes, c.batchRecords, c.commitSeconds, c.snapshots, c.snapshotAge} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	if c.l == nil {
		ch <- prometheus.NewInvalidMetric(c.decisions, errNilLimiter)
		return
	}
	s := c.l.Stats()
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	counter(c.decisions, s.Grants, "granted")
	counter(c.decisions, s.Denials, "denied")
	counter(c.reservations, s.Reservations)
	counter(c.errors, s.Unavailable)
	counter(c.tooManyKeys, s.TooManyKeys)
	gauge(c.live, float64(s.LiveBuckets))
	gauge(c.partitions, float64(s.Partitions))
	counter(c.walCommits, s.WALCommits)
	counter(c.walFailed, s.WALFailedCommits)
	counter(c.walRecords, s.WALRecords)
	counter(c.walBytes, s.WALBytes)
	// Both sums are exact: every record is in one commit, and the log adds
	// up its commit latencies.
	ch <- histogram(c.batchRecords, s.WALBatchRecords, recordsFirst, recordsLast, 1, float64(s.WALRecords))
	ch <- histogram(c.commitSeconds, s.WALCommitNanos, nanosFirst, nanosLast, 1e-9, s.WALCommitTime.Seconds())
	counter(c.snapshots, s.Snapshots)
	gauge(c.snapshotAge, s.SnapshotAge.Seconds())
}

// histogram converts power-of-two buckets first..last of h to a Prometheus
// histogram with cumulative counts, bounds (2^i - 1) * scale, and the sum
// of its values, already scaled.
func histogram(d *prometheus.Desc, h ratelimit.Histogram, first, last int, scale, sum float64) prometheus.Metric {
	buckets := make(map[float64]uint64, last-first+1)
	var total uint64
	for i, n := range h.Counts {
		total += n
		if i >= first && i <= last {
			buckets[(math.Ldexp(1, i)-1)*scale] = total
		}
	}
	return prometheus.MustNewConstHistogram(d, total, sum, buckets)
}
