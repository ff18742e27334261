package ratelimit

import (
	"fmt"
	"time"

	"github.com/seed7fbd42b6/ratelimit/internal/actor"
)

// Status is a decision. The zero value is a denial of no limit (what a
// call returns with an error).
type Status struct {
	// OK reports a grant.
	OK bool
	// RetryAfter: when denied, the earliest wait after which the same
	// request can succeed (never early); when granted as a reservation, how
	// long to wait before running the work (without asking again); else 0.
	// For a sharded limit it holds for the two shards that were examined; a
	// retry draws two shards afresh, which may be emptier. Waits saturate at
	// 2^62 ns (about 146 years): a longer one, which only a limit refilling
	// over centuries needs, reads as that and is then early.
	RetryAfter time.Duration
	// Limit is the name of the limit that decided. For LimitAll: on a
	// denial, the denying member with the latest RetryAfter; on a grant,
	// the member with the fewest tokens left.
	Limit string
	// Remaining is the tokens left in that limit's bucket after the
	// decision (negative: reserved debt; on a denial, what the bucket
	// holds, since nothing was taken); for LimitAll, of the member with
	// the fewest. For a sharded limit it is an estimate: the two examined
	// shards' average times Shards, which the other shards' states can
	// move by up to (Shards-2)/Shards of Capacity (plus of MaxReserved,
	// with debt); Limiter.Value reads every shard.
	Remaining float64
	// ResetAfter is how long that bucket needs to be full again, if nothing
	// else uses it (for a sharded limit, how long the shards the decision
	// took from or examined need: an estimate, as Remaining). It saturates
	// as RetryAfter.
	ResetAfter time.Duration
}

// Err returns nil for a grant and, for a denial, a *RateLimitedError that
// matches errors.Is(err, ErrRateLimited): the Go form of the reference's
// "throws". It describes a decision, so it is meaningful only when the call
// that returned s returned a nil error.
func (s Status) Err() error {
	if s.OK {
		return nil
	}
	return &RateLimitedError{Limit: s.Limit, RetryAfter: s.RetryAfter}
}

// RateLimitedError is a denial as an error.
type RateLimitedError struct {
	Limit      string        // the limit that denied (Status.Limit)
	RetryAfter time.Duration // as Status.RetryAfter
}

// Error says which limit denied and when to retry.
func (e *RateLimitedError) Error() string {
	return fmt.Sprintf("ratelimit: limit %q exceeded, retry after %v", e.Limit, e.RetryAfter)
}

// Is makes errors.Is(err, ErrRateLimited) true.
func (e *RateLimitedError) Is(target error) bool { return target == ErrRateLimited }

// Value is a bucket's state projected to now.
type Value struct {
	// Value is the tokens available now, summed over shards; negative is
	// reserved debt.
	Value float64
	// TS is the state's time: for a token bucket now, or, while the clock
	// reads earlier than the bucket was last written (it went back), that
	// later time; for a fixed window the current window's start.
	TS time.Time
	// Config is the limit's config with defaults applied.
	Config Config
}

// fill sets s to the Status of a member's outcome, field by field.
func (d *limitDef) fill(s *Status, m *actor.Member) {
	left := m.Left
	if m.Second >= 0 { // two shards: report their average, scaled to the limit
		left /= 2
	}
	s.OK = m.OK
	s.RetryAfter = time.Duration(m.RetryAfter)
	s.Limit = d.name
	s.Remaining = left * float64(d.shards)
	s.ResetAfter = time.Duration(m.UntilFull)
}
