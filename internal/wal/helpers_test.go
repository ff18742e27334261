package wal

import (
	"encoding/binary"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// chanWaiter delivers Committed's error on a channel (buffer it by 1).
type chanWaiter chan error

func (c chanWaiter) Committed(err error) { c <- err }

// syncWaiter records the outcome; for calls made before Append returns.
type syncWaiter struct {
	called bool
	err    error
}

func (w *syncWaiter) Committed(err error) { w.called, w.err = true, err }

func tempPath(t *testing.T) string {
	return filepath.Join(t.TempDir(), "sub", "dir", "wal.db")
}

func mustOpen(t *testing.T, path string, opts Options) *Log {
	t.Helper()
	l, err := Open(path, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// appendWait appends recs and waits for the commit.
func appendWait(t *testing.T, l *Log, recs ...Record) {
	t.Helper()
	w := make(chanWaiter, 1)
	l.Append(recs, w)
	if err := <-w; err != nil {
		t.Fatalf("Committed: %v", err)
	}
}

func replayAll(t *testing.T, l *Log, after uint64) []Record {
	t.Helper()
	var got []Record
	if err := l.Replay(after, func(r Record) error { got = append(got, r); return nil }); err != nil {
		t.Fatalf("Replay: %v", err)
	}
	return got
}

// metaVersion reads the format version stored in l's file.
func metaVersion(t *testing.T, l *Log) uint32 {
	t.Helper()
	var v uint32
	if err := l.DB().View(func(tx *bolt.Tx) error {
		v = binary.BigEndian.Uint32(tx.Bucket(metaBucket).Get(versionKey))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return v
}

// flatten joins batches into one slice of records, in order.
func flatten(batches [][]Record) []Record {
	var flat []Record
	for _, b := range batches {
		flat = append(flat, b...)
	}
	return flat
}

// checkRecords fails t unless got and want hold the same records in order.
func checkRecords(t *testing.T, what string, got, want []Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d records, want %d", what, len(got), len(want))
	}
	for i := range want {
		if !sameRecord(got[i], want[i]) {
			t.Fatalf("%s: record %d is %+v, want %+v", what, i, got[i], want[i])
		}
	}
}
