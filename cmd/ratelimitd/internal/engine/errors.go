package engine

import "errors"

// Sentinel errors. Every error Decide and the operator methods return
// wraps one of these, or is a context's error (returned as is).
var (
	// ErrInvalidRequest: the request is malformed or exceeds a bound of
	// Limits; nothing was decided.
	ErrInvalidRequest = errors.New("invalid request")
	// ErrUnknownDomain: the domain is not configured and
	// Options.UnknownDomainError is set.
	ErrUnknownDomain = errors.New("unknown domain")
	// ErrUnknownDescriptor: an operator action named a descriptor that no
	// counting rule matches.
	ErrUnknownDescriptor = errors.New("no limit applies to the descriptor")
	// ErrUnavailable: the limiter could not decide (its storage failed,
	// it is closed, or it holds too many keys); the request was refused,
	// failing closed.
	ErrUnavailable = errors.New("limiter unavailable")
)
