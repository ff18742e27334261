package wal

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// The golden files pin the batch encoding (batch-v1.bin, BatchVersion 1)
// and each file format version (v<N>.db, TestGoldenDB). Regenerate with
// WAL_GOLDEN=1 go test -run Golden ./wal/ (only when a version changes).
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

// testdata/v<N>.db is a log written by format version N: goldenDB(N)'s
// batches, then truncated up to 1. Version 2's last batch is large enough
// to be stored in chunks. Every later version must open each file and
// replay the same records. Regenerate (only the current version's file,
// when the format version changes) with: WAL_GOLDEN=1 go test -run Golden ./wal/
func goldenDB(version int) [][]Record {
	batches := goldenRecords()
	if version >= 2 {
		batches = append(batches, bigBatch("golden", 1000))
	}
	return batches
}

func TestGoldenDB(t *testing.T) {
	for version := 1; version <= FormatVersion; version++ {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) { checkGoldenDB(t, version) })
	}
}

func checkGoldenDB(t *testing.T, version int) {
	golden := filepath.Join("testdata", fmt.Sprintf("v%d.db", version))
	batches := goldenDB(version)
	if regenerate && version == FormatVersion {
		os.Remove(golden)
		l, err := Open(golden, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, recs := range batches {
			appendWait(t, l, recs...)
		}
		if err := l.DB().Update(func(tx *bolt.Tx) error { return l.TruncateTx(tx, 1) }); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "golden.db")
	copyFile(t, golden, path)
	l := mustOpen(t, path, Options{})
	last := uint64(len(batches))
	if l.Position() != last {
		t.Fatalf("position %d, want %d", l.Position(), last)
	}
	if v := metaVersion(t, l); v != uint32(version) {
		t.Fatalf("%s says version %d", golden, v)
	}
	if version >= 2 && len(logKeys(t, l)) <= len(batches)-1 {
		t.Fatalf("no chunked batch in %s", golden)
	}
	checkRecords(t, "replay", replayAll(t, l, 0), flatten(batches[1:]))
	appendWait(t, l, Record{Name: "next"})
	if l.Position() != last+1 {
		t.Fatalf("position after append %d, want %d", l.Position(), last+1)
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
