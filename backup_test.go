package ratelimit

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestBackupOfALiveFileRecovers(t *testing.T) {
	clk := newClock()
	dir := t.TempDir()
	limits := map[string]Config{"api": tokenBucket(10, 10)}
	l := open(t, Options{Path: filepath.Join(dir, "live.db"), Now: clk.Now, LogPreallocate: -1, Limits: limits})
	grant(t, l, Request{Name: "api", Key: "a", Count: 3})
	if err := l.Snapshot(); err != nil {
		t.Fatal(err)
	}
	grant(t, l, Request{Name: "api", Key: "b", Count: 8}) // in the log after the snapshot
	var buf bytes.Buffer
	n, err := l.Backup(&buf)
	if err != nil || n != int64(buf.Len()) || n == 0 {
		t.Fatalf("Backup = %d, %v (buffer %d bytes)", n, err, buf.Len())
	}
	grant(t, l, Request{Name: "api", Key: "a", Count: 1}) // after the backup: not in it
	copyPath := filepath.Join(dir, "copy.db")
	if err := os.WriteFile(copyPath, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Open(Options{Path: copyPath, Now: clk.Now, LogPreallocate: -1, Limits: limits})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if a, b := value(t, c, "api", "a").Value, value(t, c, "api", "b").Value; a != 7 || b != 2 {
		t.Fatalf("restored a=%v b=%v, want 7 and 2", a, b)
	}
}

func TestBackupNeedsAFile(t *testing.T) {
	l, err := Open(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Backup(new(bytes.Buffer)); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("Backup in memory = %v, want ErrInvalidOptions", err)
	}
	l.Close()
	if _, err := l.Backup(new(bytes.Buffer)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Backup after Close = %v, want ErrClosed", err)
	}
}

// writerFunc is an io.Writer that calls itself.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// A writer's error is ErrUnavailable, even while Close waits for the
// backup to end (Close marks the limiter closed first); ErrClosed is for
// a backup that found the file already closed.
func TestBackupWriterErrorWhileClosing(t *testing.T) {
	l := open(t, Options{Path: filepath.Join(t.TempDir(), "rl.db"), LogPreallocate: -1, Limits: map[string]Config{"api": tokenBucket(10, 10)}})
	grant(t, l, Request{Name: "api", Key: "a", Count: 1})
	closing := make(chan error, 1)
	w := writerFunc(func([]byte) (int, error) {
		go func() { closing <- l.Close() }()
		for !l.closed.Load() {
			runtime.Gosched()
		}
		return 0, errors.New("disk full")
	})
	_, err := l.Backup(w)
	if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrClosed) || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("Backup with a failing writer while Close waits: %v, want ErrUnavailable, disk full", err)
	}
	if err := <-closing; err != nil {
		t.Errorf("Close: %v", err)
	}
}
