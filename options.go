package ratelimit

import (
	"log/slog"
	"time"
)

// Options configure a Limiter. The zero value is valid: an in-memory
// limiter with no named limits (requests then carry their Config inline).
// Zero fields mean the documented defaults; Open rejects a field out of
// range with ErrInvalidOptions.
type Options struct {
	// Path is the bbolt file that holds durable state, created if absent.
	// "" keeps state in memory only: nothing survives Close. A Path that
	// names something other than a regular file (a directory, a FIFO, a
	// device) is ErrInvalidOptions.
	Path string
	// Limits are the named limits. A Request may instead carry its config
	// inline.
	Limits map[string]Config
	// Now is the clock; nil means the wall clock (time.Now, followed
	// between readings through the monotonic clock, and read again once a
	// second). It is called concurrently, so it must be safe for
	// concurrent use. A time outside the years 1678 to 2262 reads as the
	// nearest time inside them.
	Now func() time.Time
	// Partitions is the number of actor partitions (owners of buckets);
	// 0 means 8 x GOMAXPROCS with Path set and 16 x GOMAXPROCS in memory,
	// at most MaxPartitions and at most MaxBuckets. More than MaxBuckets
	// is ErrInvalidOptions. A caller that finds its partition idle
	// decides on its own goroutine, so idle partitions cost nothing, and
	// more of them make two callers meeting on one (one of them then
	// waits) rarer.
	Partitions int
	// LockTimeout bounds how long Open waits for another process's lock on
	// Path; 0 means DefaultLockTimeout, < 0 tries once without waiting.
	LockTimeout time.Duration
	// SnapshotBytes triggers a snapshot once the log holds this many bytes
	// that no snapshot covers (a log tail recovered at Open included); 0
	// means DefaultSnapshotBytes, < 0 disables the trigger.
	SnapshotBytes int64
	// SnapshotInterval triggers a snapshot when this much time has passed
	// since the last one (or Open) and the log holds records no snapshot
	// covers; 0 means DefaultSnapshotInterval, < 0 disables the trigger.
	SnapshotInterval time.Duration
	// LogPreallocate is how far ahead of the log's use the file is
	// extended with written zeros, so that a commit that grows the file
	// writes into space the file system has already allocated and its
	// fsync has no allocation to journal. The file grows in steps of this
	// size, and never into the last free space of its file system; 0 means
	// DefaultLogPreallocate, < 0 turns preallocation off. At most
	// MaxLogPreallocate.
	LogPreallocate int64
	// SweepInterval is how often partitions drop buckets that have refilled
	// to full (a full bucket equals an absent one); 0 means
	// DefaultSweepInterval, < 0 disables sweeping (snapshots still drop
	// full buckets). Background triggers are checked once a second, so
	// shorter intervals act as one second.
	SweepInterval time.Duration
	// MaxBuckets bounds the buckets held (in memory, and so in the file).
	// The partitions share it evenly; a request that needs new buckets
	// beyond its partition's share fails with ErrTooManyKeys, taking
	// nothing, while requests on the buckets held go on, and buckets that
	// refill to full are dropped (see SweepInterval) and make room again.
	// So the limiter holds at most MaxBuckets (buckets recovered from a
	// file opened with a lower bound or other partitions are kept), and
	// refusals can begin a little before it when keys are unevenly
	// spread. It stops a flood of one-off keys (rotating addresses,
	// random API keys) from growing memory, the log and snapshots without
	// bound. 0 means DefaultMaxBuckets, < 0 no bound. A bucket takes
	// about 100 bytes plus its key and name in memory. On Redis
	// (redislimit) it must not be above 0: the buckets live on the server.
	MaxBuckets int
	// Logger receives errors and recovery events; nil discards them.
	Logger *slog.Logger

	// beforeCommit is a fault-injection hook for tests (wal.Options).
	beforeCommit func(seq uint64) error
	// queueOnly makes every message queue for the partitions' goroutines
	// (actor.Group.QueueOnly), for tests.
	queueOnly bool
}

// Defaults and bounds of Options.
const (
	DefaultLockTimeout      = time.Second
	DefaultSnapshotBytes    = 64 << 20
	DefaultSnapshotInterval = 10 * time.Minute
	DefaultSweepInterval    = time.Minute
	DefaultLogPreallocate   = 8 << 20
	DefaultMaxBuckets       = 1 << 22
	MaxLogPreallocate       = 1 << 30
	MaxPartitions           = 1 << 12
)

// The default numbers of partitions per processor: enough that concurrent
// callers rarely meet on one partition, few enough that LimitMany, which
// sends one message per partition it touches, still batches well. In
// memory a partition is little more than a striped lock with its table,
// so more pay; with a log, every partition a commit's cohort touches adds
// its own batch of records, so fewer do.
const (
	partitionsPerProc       = 8
	memoryPartitionsPerProc = 16
)

// orDefault returns d, or def when d is 0; a negative d (disabled) stays.
func orDefault[T ~int | ~int64](d, def T) T {
	if d == 0 {
		return def
	}
	return d
}
