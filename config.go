package ratelimit

import (
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/seed7fbd42b6/ratelimit/internal/wal"
)

// Kind is a limit's algorithm.
type Kind int

const (
	// TokenBucket refills continuously: Rate tokens per Period, up to
	// Capacity.
	TokenBucket Kind = iota + 1
	// FixedWindow refills in steps: Rate tokens at the start of each window
	// of length Period, up to Capacity.
	FixedWindow
)

// String returns "token bucket" or "fixed window".
func (k Kind) String() string {
	switch k {
	case TokenBucket:
		return "token bucket"
	case FixedWindow:
		return "fixed window"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// MaxShards is the largest Config.Shards accepted.
const MaxShards = 1 << 16

// MaxKeyLen is the longest key (and limit name), in bytes, that a request
// may carry: the write-ahead log's bound on a record field.
const MaxKeyLen = wal.MaxFieldLen

// MaxPartitions is the largest Options.Partitions accepted.
const MaxPartitions = 1 << 12

// partitionsPerProc is the default number of partitions per processor
// (measured with go run ./bench -partitions N, keys scenario at 256
// callers on 2 processors: 2 partitions 0.32x the striped map, 16 0.56x,
// 64 0.64x; more partitions cut LimitMany, whose requests split into one
// message per partition).
const partitionsPerProc = 8

// Config describes one limit. The zero value is invalid: Kind, Rate and
// Period must be set.
type Config struct {
	Kind   Kind
	Rate   float64       // tokens added per Period; > 0, finite
	Period time.Duration // > 0
	// Capacity is the most tokens a bucket holds (the burst); 0 means Rate.
	// Finite, >= 0.
	Capacity float64
	// MaxReserved is the most debt a reservation (Request.Reserve) may
	// leave; 0 means unlimited. Finite, >= 0.
	MaxReserved float64
	// Shards splits the limit into that many buckets per key, each with
	// Rate, Capacity and MaxReserved divided evenly; 0 or 1 means one
	// bucket. At most MaxShards. Shards sit in pairs, one pair per
	// partition, and a request takes from the better of a random pair:
	// prefer an even count, since the last shard of an odd one has no
	// mate and its requests cross two partitions (BenchmarkLimitHot: 5
	// shards cost ~2x 4 shards a decision on average, though only a fifth
	// of requests start at the lone shard).
	Shards int
	// Start is, for FixedWindow only, a time at which a window begins. Zero
	// derives the phase from a hash of (name, key): deterministic across
	// resets and restarts, and spread over keys. Must be zero for
	// TokenBucket, and otherwise within the years 1678 to 2261 (Unix
	// nanoseconds in an int64).
	Start time.Time
}

// Options configure a Limiter. Zero values mean the documented defaults.
type Options struct {
	// Path is the bbolt file that holds durable state. "" keeps state in
	// memory only: nothing survives Close.
	Path string
	// Limits are the named limits. A Request may instead carry its config
	// inline.
	Limits map[string]Config
	// Now is the clock; nil means time.Now. It is called concurrently
	// (from every partition and from callers), so it must be safe for
	// concurrent use.
	Now func() time.Time
	// Partitions is the number of actor partitions (goroutines owning
	// buckets); 0 means 8 x GOMAXPROCS. A caller that finds its partition
	// idle decides on its own goroutine, so idle partitions cost nothing
	// and more of them make two callers meeting on one (and one of them
	// parking) rarer. A sharded limit's shards sit in pairs, one pair per
	// partition, on min(Partitions, Shards/2) partitions (see the actor
	// package).
	Partitions int
	// LockTimeout bounds how long Open waits for another process's lock on
	// Path; 0 means 1 s, < 0 tries once without waiting.
	LockTimeout time.Duration
	// SnapshotBytes triggers a snapshot once the log holds this many bytes
	// that no snapshot covers (the log tail recovered at Open included);
	// 0 means 64 MiB, < 0 disables the trigger.
	SnapshotBytes int64
	// SnapshotInterval triggers a snapshot when this much time passed since
	// the last one (or Open) and the log holds records no snapshot covers
	// (a tail recovered at Open included); 0 means 10 min, < 0 disables
	// the trigger.
	SnapshotInterval time.Duration
	// LogPreallocate is how far past its used pages Open extends Path with
	// written zeros, so that log commits that grow the file write into
	// space the file system has already allocated: their fdatasync then
	// has no allocation to journal (a 1,000-record commit took 1.14-1.17
	// ms instead of 1.29-1.65 ms on our test VM, ext4: go test -bench
	// CommitBatch ./wal). 0 means 64 MiB (wal.DefaultPreallocate: the
	// log bytes SnapshotBytes lets grow, by default, before a snapshot
	// frees log pages for reuse); < 0 writes nothing. At most
	// wal.MaxPreallocate (16 GiB). The file takes that much disk space at
	// once, like etcd's preallocated WAL segments.
	LogPreallocate int64
	// SweepInterval is how often partitions drop buckets that have refilled
	// to full (a full bucket equals an absent one); 0 means 1 min, < 0
	// disables sweeping (snapshots still skip and drop full buckets). The
	// background triggers (sweeps, snapshots) are checked once a second, so
	// shorter intervals act as 1 s. A sweep examines a partition's buckets
	// in slices of 16Ki, one message each, so requests interleave with it.
	SweepInterval time.Duration
	// Logger receives errors and recovery events; nil discards them.
	Logger *slog.Logger

	// beforeCommit is a fault-injection hook for tests (wal.Options).
	beforeCommit func(seq uint64) error
	// queueOnly makes every message queue for the partitions' goroutines
	// (actor.Group.QueueOnly), for tests.
	queueOnly bool
}

// validate reports the first rule c breaks, wrapped in ErrInvalidConfig.
func (c Config) validate(name string) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: limit %q: %s", ErrInvalidConfig, name, fmt.Sprintf(format, args...))
	}
	switch {
	case len(name) > MaxKeyLen:
		return fmt.Errorf("%w: limit name of %d bytes is longer than %d", ErrInvalidConfig, len(name), MaxKeyLen)
	case c.Kind != TokenBucket && c.Kind != FixedWindow:
		return bad("unknown kind %d", int(c.Kind))
	case !finite(c.Rate) || c.Rate <= 0:
		return bad("rate %v must be finite and > 0", c.Rate)
	case c.Period <= 0:
		return bad("period %v must be > 0", c.Period)
	case !finite(c.Capacity) || c.Capacity < 0:
		return bad("capacity %v must be finite and >= 0", c.Capacity)
	case !finite(c.MaxReserved) || c.MaxReserved < 0:
		return bad("maxReserved %v must be finite and >= 0", c.MaxReserved)
	case c.Shards < 0 || c.Shards > MaxShards:
		return bad("shards %d must be in [0, %d]", c.Shards, MaxShards)
	case c.Kind == TokenBucket && !c.Start.IsZero():
		return bad("start is only for fixed windows")
	case !c.Start.IsZero() && (c.Start.Before(minStart) || c.Start.After(maxStart)):
		return bad("start %v outside the years 1678 to 2261", c.Start)
	}
	return nil
}

// withDefaults returns c with Capacity and Shards defaulted.
func (c Config) withDefaults() Config {
	if c.Capacity == 0 {
		c.Capacity = c.Rate
	}
	if c.Shards == 0 {
		c.Shards = 1
	}
	return c
}

// The range of times whose Unix nanoseconds fit an int64.
var (
	minStart = time.Unix(0, math.MinInt64).Add(time.Hour)
	maxStart = time.Unix(0, math.MaxInt64).Add(-time.Hour)
)

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
