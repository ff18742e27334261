package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

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

// boltFile creates a plain bbolt file and lets fn fill it.
func boltFile(t *testing.T, fn func(tx *bolt.Tx) error) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "foreign.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(fn); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestOpenRejectsForeignBolt(t *testing.T) {
	meta := func(magic string, version []byte) func(tx *bolt.Tx) error {
		return func(tx *bolt.Tx) error {
			b, err := tx.CreateBucket(metaBucket)
			if err != nil {
				return err
			}
			if _, err := tx.CreateBucket(logBucket); err != nil {
				return err
			}
			if err := b.Put(magicKey, []byte(magic)); err != nil {
				return err
			}
			return b.Put(versionKey, version)
		}
	}
	v := func(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }
	cases := []struct {
		name string
		fill func(tx *bolt.Tx) error
		want error
	}{
		{"other buckets, no meta", func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("users")); return err }, ErrCorrupt},
		{"wrong magic", meta("someone else", v(1)), ErrCorrupt},
		{"version 0", meta(Magic, v(0)), ErrCorrupt},
		{"short version", meta(Magic, []byte{1}), ErrCorrupt},
		{"newer version", meta(Magic, v(FormatVersion+1)), ErrVersion},
		{"no log bucket", func(tx *bolt.Tx) error {
			b, err := tx.CreateBucket(metaBucket)
			if err != nil {
				return err
			}
			b.Put(magicKey, []byte(Magic))
			return b.Put(versionKey, v(1))
		}, ErrCorrupt},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, err := Open(boltFile(t, tc.fill), Options{})
			if !errors.Is(err, tc.want) {
				if l != nil {
					l.Close()
				}
				t.Fatalf("Open: %v, want %v", err, tc.want)
			}
		})
	}
}

// An empty bbolt file (no buckets) is adopted as a new log.
func TestOpenAdoptsEmptyBolt(t *testing.T) {
	l := mustOpen(t, boltFile(t, func(*bolt.Tx) error { return nil }), Options{})
	appendWait(t, l, Record{Name: "x"})
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
