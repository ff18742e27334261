package ratelimit

import "github.com/seed7fbd42b6/ratelimit/internal/actor"

// Request asks a limit for tokens.
type Request struct {
	// Name is the limit's: one of Options.Limits, or any name for a
	// Config carried inline.
	Name string
	// Key selects the bucket within the limit; "" is the limit's one
	// shared (global) bucket. Any bytes.
	Key string
	// Count is the number of tokens; 0 means 1. Negative, NaN, infinite, or
	// more than the limit can ever grant at once: ErrInvalidCount.
	Count float64
	// Reserve grants even when tokens are short, leaving debt (at most
	// Config.MaxReserved); Status.RetryAfter then says when to run the work.
	Reserve bool
	// CheckOnly decides the request without taking anything, as Check
	// does: in LimitAll, a part of the call that must pass for the call to
	// be granted but consumes nothing.
	CheckOnly bool
	// Config, if set, is the limit's config inline; it wins over
	// Options.Limits. It is validated once per distinct config and cached.
	Config *Config
}

// Decision is one request's outcome in LimitMany.
type Decision struct {
	Status
	Err error // non-nil: the request could not be decided (nothing consumed, but see ErrUnavailable)
}

// op is what r asks of its buckets.
func (r *Request) op() actor.Op {
	if r.CheckOnly {
		return actor.OpCheck
	}
	return actor.OpTake
}
