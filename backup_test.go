package ratelimit_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/seed7fbd42b6/ratelimit"
	"github.com/seed7fbd42b6/ratelimit/ratelimittest"
)

func TestBackupOfALiveFileRecovers(t *testing.T) {
	clk := ratelimittest.NewClock(setT0)
	dir := t.TempDir()
	limits := map[string]ratelimit.Config{"api": tokenBucket(10, 10)}
	l, err := ratelimit.Open(ratelimit.Options{Path: filepath.Join(dir, "live.db"), Now: clk.Now, LogPreallocate: -1, Limits: limits})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	mustTake(t, l, "api", "a", 3)
	if err := l.Snapshot(); err != nil {
		t.Fatal(err)
	}
	mustTake(t, l, "api", "b", 8) // in the log after the snapshot
	var buf bytes.Buffer
	n, err := l.Backup(&buf)
	if err != nil || n != int64(buf.Len()) || n == 0 {
		t.Fatalf("Backup = %d, %v (buffer %d bytes)", n, err, buf.Len())
	}
	mustTake(t, l, "api", "a", 1) // after the backup: not in it
	copyPath := filepath.Join(dir, "copy.db")
	if err := os.WriteFile(copyPath, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := ratelimit.Open(ratelimit.Options{Path: copyPath, Now: clk.Now, LogPreallocate: -1, Limits: limits})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if a, b := mustValue(t, c, "api", "a"), mustValue(t, c, "api", "b"); a != 7 || b != 2 {
		t.Fatalf("restored a=%v b=%v, want 7 and 2", a, b)
	}
}

func TestBackupNeedsAFile(t *testing.T) {
	l, err := ratelimit.Open(ratelimit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Backup(new(bytes.Buffer)); !errors.Is(err, ratelimit.ErrInvalidOptions) {
		t.Fatalf("Backup in memory = %v, want ErrInvalidOptions", err)
	}
	l.Close()
	if _, err := l.Backup(new(bytes.Buffer)); !errors.Is(err, ratelimit.ErrClosed) {
		t.Fatalf("Backup after Close = %v, want ErrClosed", err)
	}
}
