package wal

// The meta bucket (meta.go): magic, format version and its upgrade.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

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

// A file is version 1 until the commit of its first chunked batch marks it
// version 2, so that a build reading only version 1 can still open it.
func TestFirstChunkedBatchMarksTheFileVersion2(t *testing.T) {
	path := tempPath(t)
	l := mustOpen(t, path, Options{})
	appendWait(t, l, Record{Name: "small"})
	if v := metaVersion(t, l); v != 1 {
		t.Fatalf("new file without chunks is version %d, want 1", v)
	}
	l.Close()

	l = mustOpen(t, path, Options{})
	if v := metaVersion(t, l); v != 1 {
		t.Fatalf("reopened file without chunks is version %d, want 1", v)
	}
	appendWait(t, l, bigBatch("big", 2000)...)
	if v := metaVersion(t, l); v != chunkedVersion || FormatVersion != chunkedVersion {
		t.Fatalf("version %d after a chunked batch, want %d (FormatVersion %d)", v, chunkedVersion, FormatVersion)
	}
	appendWait(t, l, bigBatch("big2", 2000)...)
	l.Close()

	l = mustOpen(t, path, Options{})
	if v := metaVersion(t, l); v != chunkedVersion {
		t.Fatalf("reopened version %d, want %d", v, chunkedVersion)
	}
	if got := replayAll(t, l, 0); len(got) != 1+2000+2000 || got[0].Name != "small" {
		t.Fatalf("replayed %d records", len(got))
	}
}

// Open upgrades only files it accepts: a version 1 file that fails to open
// stays version 1, a newer one stays as it is, version 0 is ErrCorrupt and
// not rewritten; an accepted version 1 file replays and becomes version 2.
func TestVersionUpgradeOnlyOnSuccess(t *testing.T) {
	setVersion := func(path string, v uint32) {
		rawUpdate(t, path, func(meta, _ *bolt.Bucket) error {
			return meta.Put(versionKey, binary.BigEndian.AppendUint32(nil, v))
		})
	}
	newFile := func(t *testing.T) string {
		path := filepath.Join(t.TempDir(), "v.db")
		l := mustOpen(t, path, Options{})
		appendWait(t, l, Record{Name: "one"})
		appendWait(t, l, Record{Name: "two"})
		l.Close()
		return path
	}
	t.Run("v1 with a bad last key", func(t *testing.T) {
		path := newFile(t)
		setVersion(path, 1)
		rawUpdate(t, path, func(_, lb *bolt.Bucket) error { return lb.Put([]byte{0xff}, []byte("x")) })
		if _, err := Open(path, Options{}); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Open: %v, want ErrCorrupt", err)
		}
		if v := fileVersion(t, path); v != 1 {
			t.Fatalf("a file that failed to open was rewritten to version %d", v)
		}
	})
	for _, tc := range []struct {
		v    uint32
		want error
	}{{0, ErrCorrupt}, {3, ErrVersion}, {255, ErrVersion}, {256, ErrCorrupt}, {math.MaxUint32, ErrCorrupt}} { // above 255: a damaged field
		t.Run(fmt.Sprintf("v%d", tc.v), func(t *testing.T) {
			path := newFile(t)
			setVersion(path, tc.v)
			if _, err := Open(path, Options{}); !errors.Is(err, tc.want) {
				t.Fatalf("Open: %v, want %v", err, tc.want)
			}
			if v := fileVersion(t, path); v != tc.v {
				t.Fatalf("version %d after a refused Open, want %d", v, tc.v)
			}
		})
	}
	t.Run("v1 accepted", func(t *testing.T) {
		path := newFile(t)
		setVersion(path, 1)
		l := mustOpen(t, path, Options{})
		if got := replayAll(t, l, 0); len(got) != 2 || l.Position() != 2 {
			t.Fatalf("replayed %d records at position %d", len(got), l.Position())
		}
		appendWait(t, l, bigBatch("three", 2000)...)
		l.Close()
		if v := fileVersion(t, path); v != FormatVersion {
			t.Fatalf("version %d, want %d", v, FormatVersion)
		}
	})
}
