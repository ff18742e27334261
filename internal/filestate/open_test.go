//go:build unix

package filestate

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// openRead does not wait for a writer on a FIFO, so that Open refuses
// one rather than wait on it.
func TestOpenReadDoesNotWaitOnAFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		f, err := openRead(fifo)
		if err == nil {
			f.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("openRead: %v", err)
		}
	case <-time.After(10 * time.Second): // a failure detector, not a wait
		t.Fatal("openRead waited for a writer")
	}
	if _, err := Open(fifo); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("Open: %v, want not a regular file", err)
	}
}
