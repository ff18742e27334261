//go:build unix

package wal

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// lockFile takes an exclusive flock on f, retrying until timeout.
func lockFile(f *os.File, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			return fmt.Errorf("wal: lock: %w", err)
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("%w: waited %v", ErrLocked, timeout)
		}
		time.Sleep(min(50*time.Millisecond, time.Until(deadline)))
	}
}
