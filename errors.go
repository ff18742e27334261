package ratelimit

import "errors"

// Sentinel errors. Every error returned by this package wraps one of these,
// so callers test with errors.Is. A call that returns an error consumed
// nothing, except where a method's documentation says otherwise.
var (
	// ErrUnknownLimit: the request names a limit that is neither in
	// Options.Limits nor given inline.
	ErrUnknownLimit = errors.New("ratelimit: unknown limit")
	// ErrInvalidConfig: a Config breaks a rule listed on Config.
	ErrInvalidConfig = errors.New("ratelimit: invalid config")
	// ErrInvalidCount: a count is negative, NaN or infinite, or larger than
	// the limit could ever grant.
	ErrInvalidCount = errors.New("ratelimit: invalid count")
	// ErrInvalidOptions: Options other than the limits are invalid.
	ErrInvalidOptions = errors.New("ratelimit: invalid options")
	// ErrClosed: the Limiter has been closed.
	ErrClosed = errors.New("ratelimit: limiter closed")
	// ErrUnavailable: the write-ahead log could not be written. The grant
	// was not acknowledged; the limiter fails closed and refuses further
	// grants until it is reopened.
	ErrUnavailable = errors.New("ratelimit: persistence unavailable")
	// ErrRateLimited is matched (errors.Is) by the error Status.Err returns
	// for a denial.
	ErrRateLimited = errors.New("ratelimit: rate limited")
)
