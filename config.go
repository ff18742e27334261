package ratelimit

import (
	"fmt"
	"math"
	"time"
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

// MaxKeyLen is the longest key, and the longest limit name, in bytes, that
// a request may carry: 1 MiB.
const MaxKeyLen = 1 << 20

// Config describes one limit. The zero value is invalid: Kind, Rate and
// Period must be set. Open (or the first request carrying it inline)
// rejects a Config that breaks a rule below with ErrInvalidConfig.
type Config struct {
	Kind   Kind          // TokenBucket or FixedWindow
	Rate   float64       // tokens added per Period; > 0, finite
	Period time.Duration // > 0
	// Capacity is the most tokens a bucket holds (the burst); 0 means Rate.
	// Finite, >= 0. Counts may be fractional, so a capacity below 1 is
	// valid, but then no request of one token is ever granted.
	Capacity float64
	// MaxReserved is the most debt a reservation (Request.Reserve) may
	// leave; 0 means unlimited. Finite, >= 0.
	MaxReserved float64
	// Shards splits the limit into that many buckets per key, each with
	// Rate, Capacity and MaxReserved divided evenly; 0 or 1 means one
	// bucket. At most MaxShards.
	//
	// Shard a limit only when one key is hot enough for its partition to
	// be the bottleneck (a global limit that every request takes from).
	// A request takes from the better of two shards, or splits across
	// both, so one request can never take more than two shards' worth:
	// Count must fit 2*Capacity/Shards. Remaining and ResetAfter of a
	// sharded limit are estimates (see Status). Prefer an even count:
	// shards sit in pairs on one partition, and the last shard of an odd
	// count has no mate, so its requests cross two partitions.
	Shards int
	// Start is, for FixedWindow only, a time at which a window begins
	// (time.Unix(0, 0) aligns windows to the Unix epoch). Zero derives the
	// phase from a hash of (name, key): deterministic across resets and
	// restarts, and spread over keys, so that windows do not all reset at
	// once. Must be zero for TokenBucket, and otherwise within the years
	// 1678 to 2261 (Unix nanoseconds in an int64).
	Start time.Time
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
