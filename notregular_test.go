//go:build unix

package ratelimit

import (
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A Path that is not a regular file is refused by Open and Salvage with a
// clear error, never waited on (opening a FIFO for reading waits for a
// writer).
func TestPathNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{fifo, dir} {
		l, err := Open(Options{Path: path, Limits: durableLimits})
		if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), "not a regular file") {
			if err == nil {
				l.Close()
			}
			t.Errorf("Open(%s): %v, want ErrInvalidOptions, not a regular file", path, err)
		}
		done := make(chan error, 1)
		go func() {
			_, err := Salvage(path, filepath.Join(t.TempDir(), "new.db"))
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "not a limiter's file") {
				t.Errorf("Salvage(%s): %v, want not a limiter's file", path, err)
			}
		case <-time.After(10 * time.Second): // a failure detector, not a wait: Salvage never blocks
			t.Fatalf("Salvage(%s): no answer after 10s", path)
		}
	}
}
