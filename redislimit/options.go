package redislimit

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/seed7fbd42b6/ratelimit"
)

// Option configures what Open does beyond ratelimit.Options: settings
// that only a Redis store has.
type Option func(*config)

type config struct {
	prefix          string
	holdTTL         time.Duration
	allowNotDurable bool
	allowEviction   bool
	skipCheck       bool
	rounds          int // rounds of function calls in flight at once
	sweep           int // expiry-index entries one function call deletes at most
	noMerge         bool
}

// Defaults of the options.
const (
	// DefaultKeyPrefix starts every key the store writes.
	DefaultKeyPrefix = "ratelimit:"
	// DefaultHoldTimeout is how long a hold of a call across slots lives.
	DefaultHoldTimeout = 10 * time.Second
)

func defaultConfig() config {
	return config{prefix: DefaultKeyPrefix, holdTTL: DefaultHoldTimeout, rounds: 2, sweep: 64}
}

// KeyPrefix starts every key of the store with prefix (default
// DefaultKeyPrefix), so that several limiters, or other data, can share
// a server. Limiters that share limits must use the same prefix. It must
// not contain '{' or '}' (Open: ErrInvalidOptions): the keys' hash tags
// follow it.
func KeyPrefix(prefix string) Option { return func(c *config) { c.prefix = prefix } }

// HoldTimeout is how long the hold a call across slots records on each
// slot lives (default DefaultHoldTimeout; <= 0 means the default), rounded
// up to a whole millisecond, the unit of a Redis expiry. Until
// it expires the call can give back what it took there if a later slot
// denies it; after, the tokens stay taken (under-admission only). A
// client that stops between the phases leaves its holds to expire. Set
// it well above the time a call across slots takes.
func HoldTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			if r := d % time.Millisecond; r != 0 {
				d -= r
				if d <= math.MaxInt64-time.Millisecond { // else the longest whole one
					d += time.Millisecond
				}
			}
			c.holdTTL = d
		}
	}
}

// AllowNotDurable lets Open accept a server that may acknowledge a write
// before it is on disk (appendonly no, appendfsync other than always, or
// no-appendfsync-on-rewrite yes). What it gives up: after the server crashes, grants it
// acknowledged in its last moments may be forgotten, and the limiter
// over-admits by what they took.
func AllowNotDurable() Option { return func(c *config) { c.allowNotDurable = true } }

// AllowEviction lets Open accept a server whose maxmemory-policy may
// evict keys. What it gives up: an evicted bucket reads as full, so the
// limiter over-admits by whatever the bucket had used.
func AllowEviction() Option { return func(c *config) { c.allowEviction = true } }

// SkipConfigCheck makes Open skip reading the servers' persistence and
// eviction settings, for servers that do not allow CONFIG (managed
// Redis). What it gives up: nothing checks that every master runs
// appendonly yes, appendfsync always, no-appendfsync-on-rewrite no and
// maxmemory-policy noeviction;
// where one does not, crashes and evictions over-admit (see
// AllowNotDurable and AllowEviction).
func SkipConfigCheck() Option { return func(c *config) { c.skipCheck = true } }

// withRounds sets how many rounds of function calls may be in flight, for
// benchmarks.
func withRounds(n int) Option { return func(c *config) { c.rounds = max(n, 1) } }

// withoutMerge makes a single server's programs one tag each, as on a
// cluster, for tests and benchmarks.
func withoutMerge() Option { return func(c *config) { c.noMerge = true } }

// withSweep sets how many due expiry-index entries a function call deletes
// (0: none), for tests.
func withSweep(n int) Option { return func(c *config) { c.sweep = n } }

func (c *config) validate() error {
	if strings.ContainsAny(c.prefix, "{}") {
		return fmt.Errorf("%w: key prefix %q contains '{' or '}'", ratelimit.ErrInvalidOptions, c.prefix)
	}
	return nil
}
