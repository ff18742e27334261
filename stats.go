package ratelimit

import (
	"time"

	"github.com/seed7fbd42b6/ratelimit/internal/wal"
)

// Stats are the limiter's counters, for dashboards and alerts (package
// ratelimitprom exports them to Prometheus).
type Stats struct {
	// Decisions since Open. A LimitAll call is one decision; Checks,
	// credits and resets are not counted. Reservations are grants that
	// must wait (RetryAfter > 0).
	Grants, Denials, Reservations uint64
	// Unavailable counts requests answered with ErrUnavailable.
	Unavailable uint64
	// TooManyKeys counts requests refused with ErrTooManyKeys: they
	// needed new buckets beyond their partition's share of
	// Options.MaxBuckets.
	TooManyKeys uint64
	// LiveBuckets is the number of buckets held in memory (not full).
	LiveBuckets int
	// Partitions is the number of partitions (Options.Partitions, or the
	// shared store's).
	Partitions int

	// The write-ahead log, since Open (zero in memory mode and on a
	// shared store): WALCommits counts the commits (one bbolt transaction
	// each, shared by every grant pending when it began), WALRecords the
	// bucket states they wrote, WALBytes the bytes of their encoded batches,
	// WALFailedCommits the commits that failed (each fails the limiter
	// closed: ErrUnavailable).
	WALCommits, WALRecords, WALBytes, WALFailedCommits uint64
	WALBatchRecords                                    Histogram     // records per commit
	WALCommitNanos                                     Histogram     // commit latency, fsync included, in ns
	WALCommitTime                                      time.Duration // the sum of the latencies WALCommitNanos counts

	// Snapshots counts the snapshots written since Open.
	Snapshots uint64
	// SnapshotAge is the time since the last snapshot (or Open, when
	// there was none); zero on a shared store, which takes none.
	SnapshotAge time.Duration
}

// HistogramBuckets is the number of buckets of a Histogram.
const HistogramBuckets = 64

// Histogram counts values in power-of-two buckets: Counts[0] holds 0 and
// Counts[i] holds values in [2^(i-1), 2^i); the last also holds anything
// larger. The zero value is an empty histogram.
type Histogram struct {
	Counts [HistogramBuckets]uint64 // values per bucket
}

// Quantile returns an upper bound of the q-quantile (0 <= q <= 1).
func (h Histogram) Quantile(q float64) uint64 {
	w := wal.Histogram(h.Counts)
	return w.Quantile(q)
}

// Count is the number of values recorded.
func (h Histogram) Count() uint64 {
	w := wal.Histogram(h.Counts)
	return w.Count()
}

// Stats reads the counters. It visits every partition, so it costs a round
// trip to each: call it every few seconds, not per request.
func (l *Limiter) Stats() Stats {
	if l.store == nil {
		return Stats{}
	}
	n := l.store.Counts()
	s := Stats{
		Grants:       n.Grants,
		Denials:      n.Denials,
		Reservations: n.Reservations,
		Unavailable:  l.unavailable.Load(),
		TooManyKeys:  n.Refused,
		LiveBuckets:  n.Live,
		Partitions:   l.store.Partitions(),
		Snapshots:    l.snapshots.Load(),
	}
	if l.group != nil { // a shared store takes no snapshots
		s.SnapshotAge = time.Since(time.Unix(0, l.lastSnap.Load()))
	}
	if l.wal != nil {
		w := l.wal.Stats()
		s.WALCommits, s.WALRecords, s.WALBytes, s.WALFailedCommits = w.Commits, w.Records, w.Bytes, w.FailedCommits
		s.WALBatchRecords.Counts = w.BatchRecords
		s.WALCommitNanos.Counts = w.CommitNanos
		s.WALCommitTime = w.CommitTime
	}
	return s
}
