package wal

import "errors"

// Sentinel errors. Every error this package returns for one of these
// conditions wraps the sentinel, so callers test with errors.Is.
var (
	// ErrLocked: another Log (in this or another process) holds the file
	// lock, and Options.LockTimeout passed before it was released.
	ErrLocked = errors.New("wal: database file is locked")
	// ErrCorrupt: the file is not a bbolt file, is a bbolt file written by
	// something else, or holds a batch or page that fails validation.
	ErrCorrupt = errors.New("wal: corrupt data")
	// ErrVersion: the file was written by a newer format version.
	ErrVersion = errors.New("wal: unsupported format version")
	// ErrFailed: a commit failed; the log is unusable from then on.
	ErrFailed = errors.New("wal: log failed")
	// ErrClosed: the log has been closed.
	ErrClosed = errors.New("wal: log closed")
	// ErrTooLarge: a record field exceeds MaxFieldLen, or the pending batch
	// would exceed MaxBatchPayload. The Append is refused; the log stays
	// healthy.
	ErrTooLarge = errors.New("wal: too large")
	// ErrInvalidOptions: an Options field is out of range.
	ErrInvalidOptions = errors.New("wal: invalid options")
	// ErrPosition: TruncateTx was asked to drop batches past Position.
	ErrPosition = errors.New("wal: position out of range")
)
