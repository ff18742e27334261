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
	for path, kind := range map[string]string{fifo: "a named pipe", dir: "a directory"} {
		l, err := Open(Options{Path: path, Limits: durableLimits})
		if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), "not a regular file: it is "+kind) {
			if err == nil {
				l.Close()
			}
			t.Errorf("Open(%s): %v, want ErrInvalidOptions, not a regular file: it is %s", path, err, kind)
		}
		done := make(chan error, 1)
		go func() {
			_, err := Salvage(path, filepath.Join(t.TempDir(), "new.db"))
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "(it is "+kind+"): not a limiter's file") {
				t.Errorf("Salvage(%s): %v, want %s: not a limiter's file", path, err, kind)
			}
		case <-time.After(10 * time.Second): // a failure detector, not a wait: Salvage never blocks
			t.Fatalf("Salvage(%s): no answer after 10s", path)
		}
	}
}
