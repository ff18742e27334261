package ratelimit

import (
	"errors"
	"fmt"
	"io"

	bolt "go.etcd.io/bbolt"
)

// Backup writes a consistent copy of the limiter's file to w while the
// limiter keeps serving, and returns the bytes written. The copy holds
// every grant acknowledged before Backup began; opened with Open (as
// Options.Path), it recovers that state. It needs Options.Path
// (ErrInvalidOptions otherwise); a write error is returned wrapped in
// ErrUnavailable. Backup holds a read transaction while it copies:
// commits go on, but pages they free are not reused until it ends, and a
// commit that must map the growing file anew waits for it; so give it a
// writer that does not stall (a local file, not a network client).
func (l *Limiter) Backup(w io.Writer) (int64, error) {
	if l.closed.Load() || l.store == nil {
		return 0, ErrClosed
	}
	if l.wal == nil {
		return 0, fmt.Errorf("%w: a limiter without Options.Path has no file to back up", ErrInvalidOptions)
	}
	var n int64
	err := l.wal.DB().View(func(tx *bolt.Tx) error {
		var err error
		n, err = tx.WriteTo(w)
		return err
	})
	switch {
	case errors.Is(err, bolt.ErrDatabaseNotOpen): // Close closed the file before the read began
		return n, fmt.Errorf("%w: backup: %w", ErrClosed, err)
	case err != nil:
		return n, fmt.Errorf("%w: backup: %w", ErrUnavailable, err)
	}
	return n, nil
}
