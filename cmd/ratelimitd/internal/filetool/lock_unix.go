//go:build unix

package filetool

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/seed7fbd42b6/ratelimit"
)

// lockShared takes a shared lock on f, so that no limiter writes the file
// while it is checked; ratelimit.ErrLocked if one has it open.
func lockShared(f *os.File) error {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return fmt.Errorf("%w: a limiter has the file open (back a live file up through the admin API)", ratelimit.ErrLocked)
	}
	return err
}
