package wal

import (
	"bytes"
	"io"
	"math"
	"os"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// The golden files pin format version 1. Regenerate (only when the format
// version changes) with: WAL_GOLDEN=1 go test -run Golden ./wal/
var regenerate = os.Getenv("WAL_GOLDEN") == "1"

func goldenRecords() [][]Record {
	return [][]Record{
		{{Name: "api", Key: "alice", Value: 9, TS: 1_700_000_000_000_000_000}},
		{
			{Name: "api", Key: "bob", Shard: 2, Value: -3.5, TS: 1_700_000_001_000_000_000},
			{Name: "", Key: "", Value: 0.125, TS: -42},
		},
		{
			{Name: "api", Key: "alice", Delete: true},
			{Name: "login", Key: "\x00\xff", Shard: 70000, Value: math.Inf(1), TS: math.MaxInt64},
		},
	}
}

func TestGoldenBatch(t *testing.T) {
	path := filepath.Join("testdata", "batch-v1.bin")
	recs := goldenRecords()[1]
	enc := EncodeBatch(nil, recs)
	if regenerate {
		if err := os.WriteFile(path, enc, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (regenerate with WAL_GOLDEN=1)", err)
	}
	if !bytes.Equal(enc, want) {
		t.Fatalf("encoding changed:\n got %x\nwant %x", enc, want)
	}
	got := decodeAll(t, want)
	if len(got) != len(recs) {
		t.Fatalf("decoded %d records", len(got))
	}
	for i := range recs {
		if !sameRecord(got[i], recs[i]) {
			t.Errorf("record %d: %+v", i, got[i])
		}
	}
}

// testdata/v1.db: three batches (goldenRecords), then truncated up to 1.
func TestGoldenDB(t *testing.T) {
	golden := filepath.Join("testdata", "v1.db")
	if regenerate {
		os.Remove(golden)
		l, err := Open(golden, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, recs := range goldenRecords() {
			appendWait(t, l, recs...)
		}
		if err := l.DB().Update(func(tx *bolt.Tx) error { return l.TruncateTx(tx, 1) }); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "v1.db")
	copyFile(t, golden, path)
	l := mustOpen(t, path, Options{})
	if l.Position() != 3 {
		t.Fatalf("position %d, want 3", l.Position())
	}
	want := append(goldenRecords()[1], goldenRecords()[2]...)
	got := replayAll(t, l, 0)
	if len(got) != len(want) {
		t.Fatalf("replayed %d records, want %d", len(got), len(want))
	}
	for i := range want {
		if !sameRecord(got[i], want[i]) {
			t.Errorf("record %d: %+v", i, got[i])
		}
	}
	appendWait(t, l, Record{Name: "next"})
	if l.Position() != 4 {
		t.Fatalf("position after append %d, want 4", l.Position())
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatalf("%v (regenerate with WAL_GOLDEN=1)", err)
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}
