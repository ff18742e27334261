//go:build !unix

package wal

import (
	"os"
	"time"
)

// lockFile leaves locking to bbolt where flock is not available; the
// check then runs before bbolt takes its lock.
func lockFile(*os.File, time.Duration) error { return nil }
