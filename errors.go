package ratelimit

import (
	"errors"

	"github.com/seed7fbd42b6/ratelimit/internal/wal"
)

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
	// ErrTooManyKeys: the request needs new buckets beyond its partition's
	// share of Options.MaxBuckets; nothing was taken. Requests on keys the
	// limiter holds are not affected.
	ErrTooManyKeys = errors.New("ratelimit: too many keys")
	// ErrTooLarge: one call asks more than its store can decide in one
	// step; nothing was taken. Only a shared store returns it: on Redis,
	// a LimitAll with more than 32,768 requests on one slot (redislimit).
	ErrTooLarge = errors.New("ratelimit: call too large")
	// ErrClosed: the Limiter has been closed.
	ErrClosed = errors.New("ratelimit: limiter closed")
	// ErrUnavailable: durable state could not be used. From a request: the
	// grant could not be made durable, it was not acknowledged, and the
	// limiter fails closed, refusing every further grant until it is
	// reopened (its tokens may still count: an error in the safe
	// direction). The one exception is a grant whose records would make
	// the pending commit larger than the log takes (256 MiB, reachable
	// only with keys near MaxKeyLen): it fails alone. From Open, Snapshot,
	// Backup or Close: the file could not be opened, read or written; the
	// error also wraps ErrLocked, ErrCorrupt or ErrVersion when one of
	// those is the reason.
	ErrUnavailable = errors.New("ratelimit: persistence unavailable")
	// ErrRateLimited is matched (errors.Is) by the error Status.Err returns
	// for a denial.
	ErrRateLimited = errors.New("ratelimit: rate limited")
)

// Reasons a file cannot be used, matched (errors.Is) by the errors of Open
// (together with ErrUnavailable) and Salvage.
var (
	// ErrLocked: another Limiter (in this or another process) holds the
	// file, and Options.LockTimeout passed before it let go.
	ErrLocked = errors.New("ratelimit: file locked by another limiter")
	// ErrCorrupt: the file is damaged, truncated, or not a limiter's file.
	// Open never starts on such a file, not even partly; Salvage recovers
	// what can be read into a new file.
	ErrCorrupt = errors.New("ratelimit: corrupt file")
	// ErrVersion: the file was written by a newer version of this package.
	ErrVersion = errors.New("ratelimit: file format newer than this version")
)

// fileError is an error of the log's file: errors.Is matches the root
// package's file sentinels for the log's own.
type fileError struct{ err error }

func (e *fileError) Error() string { return e.err.Error() }
func (e *fileError) Unwrap() error { return e.err }

// Is maps ErrLocked, ErrCorrupt and ErrVersion to the log's errors.
func (e *fileError) Is(target error) bool {
	switch target {
	case ErrLocked:
		return errors.Is(e.err, wal.ErrLocked)
	case ErrCorrupt:
		return errors.Is(e.err, wal.ErrCorrupt)
	case ErrVersion:
		return errors.Is(e.err, wal.ErrVersion)
	}
	return false
}
