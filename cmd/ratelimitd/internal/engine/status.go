package engine

import (
	"time"

	"github.com/seed7fbd42b6/ratelimit/cmd/ratelimitd/internal/config"
)

// Code is an outcome, numbered as Envoy's RateLimitResponse.Code, so a
// server converts one to the other with a cast.
type Code int32

// The outcomes.
const (
	Unknown   Code = 0
	OK        Code = 1
	OverLimit Code = 2
)

// Kind says how a descriptor was limited.
type Kind uint8

// The kinds of Status.
const (
	// NoLimit: no rule applies (unknown domain, no match, or replaced).
	NoLimit Kind = iota
	// Unlimited: the rule allows everything and counts nothing.
	Unlimited
	// Limited: the rule's limit decided the descriptor.
	Limited
)

// Status is one descriptor's outcome.
type Status struct {
	Code Code
	Kind Kind
	// Replaced: NoLimit because another matched rule replaces this
	// descriptor's rule.
	Replaced bool
	// Limit is the rule (Limited and Unlimited), nil otherwise.
	Limit *config.Limit
	// Key is the descriptor's bucket within Limit.Name (Limited).
	Key  string
	Hits uint64
	// Remaining is the tokens in the bucket after the request when it was
	// granted, and now when it was not (nothing was taken then); negative
	// is reserved debt. For a sharded limit it is an estimate.
	Remaining float64
	// RetryAfter: over the limit, the earliest wait after which the same
	// descriptor can pass (0 when it never can: Never; for hits 0, a check
	// of a bucket in debt, the wait until one token is free, up to one
	// token's refill later than the debt is repaid); granted as a
	// reservation, the wait before running the work; else 0.
	RetryAfter time.Duration
	// ResetAfter is how long until the limit is replenished: the end of
	// the current window for a fixed window, the time to refill to
	// capacity for a token bucket.
	ResetAfter time.Duration
	// Shadowed: over a shadow_mode rule's limit, so reported OK.
	Shadowed bool
	// Never: the hits exceed what the limit can ever grant (or the rule
	// has requests_per_unit 0), so the descriptor is over its limit
	// without the limiter being asked.
	Never bool
}

// Result is a request's outcome.
type Result struct {
	// Code is the request's: OverLimit when a descriptor that may deny it
	// is over its limit (nothing was taken then), else OK. In a granted
	// reservation, a hits-0 descriptor after a take on its bucket reports
	// the debt that take reserved (OverLimit, with its wait) without
	// denying the request.
	Code Code
	// Statuses has one Status per descriptor, in the request's order.
	Statuses []Status
	// RetryAfter: denied, the latest RetryAfter of the regular
	// descriptors over their limit and, when every quota_mode descriptor
	// is over, the shortest of theirs; 0 when the request can never pass
	// (a regular descriptor is Never, or every quota_mode one is).
	// Granted, the latest reservation wait.
	RetryAfter time.Duration
	// FailedOpen: the limiter could not decide and Options.FailOpen
	// answered OK; the statuses carry no limits.
	FailedOpen bool
}

// reset prepares r for a request of n descriptors, reusing its memory.
func (r *Result) reset(n int) {
	r.Code, r.RetryAfter, r.FailedOpen = OK, 0, false
	if cap(r.Statuses) < n {
		r.Statuses = make([]Status, n)
	}
	r.Statuses = r.Statuses[:n]
	clear(r.Statuses)
}
