package wal

import (
	"fmt"
	"os"
	"time"

	"github.com/seed7fbd42b6/ratelimit/internal/boltcheck"
)

// lockAndCheck takes the file's exclusive lock (waiting up to timeout for
// another Log to let go: ErrLocked after it), then checks the structure of
// every page bbolt will walk (package boltcheck): damage is ErrCorrupt,
// before bbolt can crash the process on it. An empty file is a new one.
// bbolt's own lock on the same descriptor then succeeds at once, so no
// other process can change the file between the check and the open.
func lockAndCheck(f *os.File, timeout time.Duration) error {
	if err := lockFile(f, timeout); err != nil {
		return err
	}
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.Size() == 0 {
		return nil
	}
	if err := boltcheck.Check(f, st.Size()); err != nil {
		return fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return nil
}
