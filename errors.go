package ratelimit

import "errors"

// Sentinel errors. Every error returned by this package wraps one of these,
// so callers test with errors.Is, except a context's error
// (context.Canceled, context.DeadlineExceeded), which is returned as is. A
// call that returns an error consumed nothing, except where the package
// documentation ("Guarantees") says otherwise: a request whose context
// ended, or whose grant's commit failed (ErrUnavailable), may still count.
var (
	// ErrUnknownLimit: the request names a limit that is neither in
	// Options.Limits nor given inline.
	ErrUnknownLimit = errors.New("ratelimit: unknown limit")
	// ErrInvalidConfig: a Config breaks a rule listed on Config.
	ErrInvalidConfig = errors.New("ratelimit: invalid config")
	// ErrInvalidCount: a count is negative, NaN or infinite, or larger than
	// the limit could ever grant.
	ErrInvalidCount = errors.New("ratelimit: invalid count")
	// ErrInvalidKey: a key is longer than MaxKeyLen.
	ErrInvalidKey = errors.New("ratelimit: invalid key")
	// ErrInvalidOptions: Options other than the limits are invalid.
	ErrInvalidOptions = errors.New("ratelimit: invalid options")
	// ErrClosed: the Limiter has been closed.
	ErrClosed = errors.New("ratelimit: limiter closed")
	// ErrUnavailable: durable state could not be used. From a request: the
	// write-ahead log could not be written, the grant was not acknowledged,
	// and the limiter fails closed, refusing every further grant until it is
	// reopened. The tokens of that unacknowledged grant may still count
	// (until reopening, and after it if its record reached the disk): an
	// error in the safe direction. From Open, Snapshot or Close: the file could not be opened
	// (locked by another process, corrupt, foreign, newer format) or
	// written; the wrapped error says which (errors.Is with wal.ErrLocked,
	// wal.ErrCorrupt, wal.ErrVersion).
	ErrUnavailable = errors.New("ratelimit: persistence unavailable")
	// ErrRateLimited is matched (errors.Is) by the error Status.Err returns
	// for a denial.
	ErrRateLimited = errors.New("ratelimit: rate limited")
)
