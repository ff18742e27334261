package wal

// Opening a log (log.go): position and replay after reopening, locked,
// foreign, garbage and uncreatable files.

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestReopenReplayAndPosition(t *testing.T) {
	path := tempPath(t)
	l := mustOpen(t, path, Options{})
	if l.Position() != 0 {
		t.Fatalf("fresh position %d", l.Position())
	}
	for i := range 5 {
		appendWait(t, l, Record{Name: "r", Shard: uint32(i)}, Record{Name: "r2", Shard: uint32(i)})
	}
	if l.Position() != 5 {
		t.Fatalf("position %d, want 5", l.Position())
	}
	l.Close()

	l = mustOpen(t, path, Options{})
	if l.Position() != 5 || l.Written() != 0 {
		t.Fatalf("reopened: position %d, written %d", l.Position(), l.Written())
	}
	got := replayAll(t, l, 3)
	if len(got) != 4 || got[0].Shard != 3 || got[1].Name != "r2" || got[3].Shard != 4 {
		t.Fatalf("Replay(3) = %+v", got)
	}
	if len(replayAll(t, l, 5)) != 0 || len(replayAll(t, l, 99)) != 0 || len(replayAll(t, l, math.MaxUint64)) != 0 {
		t.Fatal("Replay past the end returned records")
	}
	appendWait(t, l, Record{Name: "six"})
	if l.Position() != 6 {
		t.Fatalf("position %d, want 6", l.Position())
	}
	stop := errors.New("stop")
	if err := l.Replay(0, func(Record) error { return stop }); err != stop {
		t.Fatalf("Replay with failing fn = %v", err)
	}
}

func TestOpenLockedFile(t *testing.T) {
	path := tempPath(t)
	mustOpen(t, path, Options{})
	start := time.Now()
	l, err := Open(path, Options{LockTimeout: 100 * time.Millisecond})
	if !errors.Is(err, ErrLocked) {
		if l != nil {
			l.Close()
		}
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("second Open took %v", d)
	}
}

func TestOpenRejectsNonBoltFiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	cases := []struct {
		name    string
		content []byte
	}{
		{"one byte", []byte{1}},
		{"text", []byte("hello, this is not a database\n")},
		{"random 100", random(100)},
		{"random 4K", random(4096)},
		{"random 8K", random(8192)},
		{"random 64K", random(64 << 10)},
		{"zeros 16K", make([]byte, 16<<10)},
		{"random 1MiB", random(1 << 20)},
	}
	for i := range 30 {
		cases = append(cases, struct {
			name    string
			content []byte
		}{fmt.Sprintf("random size %d", i), random(1 + rng.IntN(40<<10))})
	}
	for _, tc := range cases {
		name, content := tc.name, tc.content
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "bad.db")
			if err := os.WriteFile(path, content, 0o600); err != nil {
				t.Fatal(err)
			}
			l, err := Open(path, Options{})
			if !errors.Is(err, ErrCorrupt) {
				if l != nil {
					l.Close()
				}
				t.Fatalf("Open: %v, want ErrCorrupt", err)
			}
		})
	}
}

// Garbage after valid meta pages must give an error or work, never crash.
//
// Not under -race: the race build enables checkptr, which turns bbolt's
// unsafe.Slice over a garbage page into a fatal error that no recover can
// catch. Without checkptr the same reads panic (recovered) or fault
// (converted to a panic by debug.SetPanicOnFault).
func TestOpenGarbagePagesNeverPanics(t *testing.T) {
	if raceEnabled {
		t.Skip("checkptr (enabled by -race) makes bbolt's reads of garbage pages fatal")
	}
	for seed := range uint64(20) {
		path := tempPath(t)
		// No preallocation: the garbage goes into bbolt's pages, not zeros
		// past them. The reopen below preallocates past the garbage.
		l := mustOpen(t, path, Options{Preallocate: -1})
		for i := range 50 {
			appendWait(t, l, Record{Name: "n", Key: string(make([]byte, 100*i))})
		}
		l.Close()
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(seed, 7))
		for i := 2 * 4096; i < len(data); i++ { // keep the two meta pages
			if seed%2 == 0 || rng.IntN(64) == 0 {
				data[i] = byte(rng.Uint32())
			}
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		l, err = Open(path, Options{})
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("seed %d: Open: %v, want ErrCorrupt", seed, err)
			}
			t.Logf("seed %d: Open: %v", seed, err)
			continue
		}
		err = l.Replay(0, func(Record) error { return nil })
		if err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("seed %d: Replay: %v", seed, err)
		}
		t.Logf("seed %d: opened; Replay: %v", seed, err)
		l.Close()
	}
}

func TestOpenDirectoryUnderFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := Open(filepath.Join(file, "sub", "wal.db"), Options{})
	if err == nil {
		l.Close()
		t.Fatal("Open under a regular file succeeded")
	}
}

// FileKind names what a path that is not a regular file is.
func TestFileKind(t *testing.T) {
	for _, c := range []struct {
		mode fs.FileMode
		want string
	}{
		{fs.ModeDir | 0o755, "a directory"},
		{fs.ModeSymlink, "a symbolic link"},
		{fs.ModeNamedPipe | 0o600, "a named pipe"},
		{fs.ModeSocket, "a socket"},
		{fs.ModeDevice | fs.ModeCharDevice, "a character device"},
		{fs.ModeDevice, "a block device"},
		{fs.ModeIrregular, "an irregular file (?---------)"},
	} {
		if got := FileKind(c.mode); got != c.want {
			t.Errorf("FileKind(%v) = %q, want %q", c.mode, got, c.want)
		}
	}
}
