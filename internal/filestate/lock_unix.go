//go:build unix

package filestate

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/seed7fbd42b6/ratelimit/internal/wal"
)

// lockShared takes a shared flock on f, so that a limiter cannot open the
// file for writing while it is read; ErrLocked if one has it open.
func lockShared(f *os.File) error {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return fmt.Errorf("%w: a limiter has the file open (copy a live file with Limiter.Backup, or ratelimitd's admin GET /v1/backup)", wal.ErrLocked)
	}
	return err
}
