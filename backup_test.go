package ratelimit

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
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
