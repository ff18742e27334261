package wal

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// HistogramBuckets is the number of buckets in a Histogram.
const HistogramBuckets = 64

// Histogram counts values in power-of-two buckets: bucket 0 holds 0, and
// bucket i (i >= 1) holds values in [2^(i-1), 2^i). The last bucket also
// holds everything larger.
type Histogram [HistogramBuckets]uint64

func bucketOf(v uint64) int { return min(bits.Len64(v), HistogramBuckets-1) }

// Count returns the number of values recorded.
func (h *Histogram) Count() uint64 {
	var n uint64
	for _, c := range h {
		n += c
	}
	return n
}

// Quantile returns an upper bound of the q-quantile (0 <= q <= 1): the
// exclusive upper edge of the bucket that holds it (0 when empty).
func (h *Histogram) Quantile(q float64) uint64 {
	total := h.Count()
	if total == 0 {
		return 0
	}
	rank := uint64(q * float64(total))
	var seen uint64
	for i, c := range h {
		seen += c
		if seen > rank || seen == total {
			if i == 0 {
				return 0
			}
			return 1 << i
		}
	}
	return 0
}

// Stats are counters since Open.
type Stats struct {
	Commits       uint64        // successful commits (one log batch each)
	Records       uint64        // records committed
	Bytes         uint64        // encoded batch bytes committed (as Written)
	FailedCommits uint64        // commits that failed (at most 1: the failure is sticky)
	BatchRecords  Histogram     // records per commit
	CommitNanos   Histogram     // commit latency (bbolt Update incl. fsync), ns
	CommitTime    time.Duration // the sum of the latencies CommitNanos counts
}

// statCounters are written by the writer goroutine only and read
// concurrently by Stats, hence atomics.
type statCounters struct {
	commits, records, bytes, failed atomic.Uint64
	nanos                           atomic.Int64 // sum of commit latencies, ns
	batch, latency                  [HistogramBuckets]atomic.Uint64
}

func (s *statCounters) record(records, bytes int, d time.Duration) {
	s.commits.Add(1)
	s.records.Add(uint64(records))
	s.bytes.Add(uint64(bytes))
	s.batch[bucketOf(uint64(records))].Add(1)
	d = max(d, 0)
	s.latency[bucketOf(uint64(d))].Add(1)
	s.nanos.Add(int64(d))
}

// Stats returns a copy of the counters. Each counter is read atomically;
// the set is not one consistent snapshot.
func (l *Log) Stats() Stats {
	s := &l.stats
	st := Stats{
		Commits:       s.commits.Load(),
		Records:       s.records.Load(),
		Bytes:         s.bytes.Load(),
		FailedCommits: s.failed.Load(),
		CommitTime:    time.Duration(s.nanos.Load()),
	}
	for i := range HistogramBuckets {
		st.BatchRecords[i] = s.batch[i].Load()
		st.CommitNanos[i] = s.latency[i].Load()
	}
	return st
}
