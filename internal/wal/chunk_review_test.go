package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// Review tests for format version 2 (chunked batches, commit 489c298).

// reviewBatches appends n distinct batches, every one of them chunked, and
// returns them in sequence order (batch i+1 is batches[i]).
func reviewBatches(t *testing.T, l *Log, n int) [][]Record {
	t.Helper()
	var out [][]Record
	for i := range n {
		recs := bigBatch(fmt.Sprintf("b%d", i+1), 1000+100*i)
		if size := len(EncodeBatch(nil, recs)); size <= chunkOver*l.pageSize {
			t.Fatalf("batch of %d bytes is not chunked", size)
		}
		appendWait(t, l, recs...)
		out = append(out, recs)
	}
	return out
}

// rawUpdate runs fn on the log bucket of the file at path, outside any Log.
func rawUpdate(t *testing.T, path string, fn func(meta, lb *bolt.Bucket) error) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(func(tx *bolt.Tx) error {
		return fn(tx.Bucket(metaBucket), tx.Bucket(logBucket))
	}); err != nil {
		t.Fatal(err)
	}
}

// fileVersion reads the meta version of the (closed) file at path.
func fileVersion(t *testing.T, path string) uint32 {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v uint32
	if err := db.View(func(tx *bolt.Tx) error {
		v = binary.BigEndian.Uint32(tx.Bucket(metaBucket).Get(versionKey))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return v
}

// A malformed key that cannot belong to the batch being assembled must not
// stop Replay before that batch: the batch is complete and sorts entirely
// before the bad key, and Replay promises that fn has seen every record of
// every earlier batch (review of 489c298 found it dropped). The key "zz"
// sorts after every 8- and 12-byte key (its first byte is above that of any
// sequence number below 2^56).
func TestReviewReplayDeliversCompleteBatchBeforeAMalformedKey(t *testing.T) {
	for _, big := range []bool{false, true} {
		t.Run(fmt.Sprintf("chunked=%v", big), func(t *testing.T) {
			l := mustOpen(t, tempPath(t), Options{})
			one := []Record{{Name: "one"}}
			two := []Record{{Name: "two"}}
			if big {
				two = bigBatch("two", 2000)
			}
			appendWait(t, l, one...)
			appendWait(t, l, two...)
			if err := l.DB().Update(func(tx *bolt.Tx) error {
				return tx.Bucket(logBucket).Put([]byte("zz"), []byte("x"))
			}); err != nil {
				t.Fatal(err)
			}
			var got []Record
			err := l.Replay(0, func(r Record) error { got = append(got, r); return nil })
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("err = %v, want ErrCorrupt", err)
			}
			if len(got) != len(one)+len(two) {
				t.Fatalf("delivered %d records before the malformed key, want %d (batches 1 and 2, both complete and earlier): %v",
					len(got), len(one)+len(two), err)
			}
		})
	}
}

// Replay(after) for every after, over consecutive chunked batches, before
// and after reopening; beyond the position and on an empty log it delivers
// nothing and does not fail.
func TestReviewReplayFromEveryPositionOfChunkedRuns(t *testing.T) {
	path := tempPath(t)
	l := mustOpen(t, path, Options{})
	if got := replayAll(t, l, 0); len(got) != 0 {
		t.Fatalf("empty log replayed %d records", len(got))
	}
	batches := reviewBatches(t, l, 5)
	check := func(l *Log) {
		t.Helper()
		for after := range uint64(len(batches) + 2) {
			want := flatten(batches[min(int(after), len(batches)):])
			checkRecords(t, fmt.Sprintf("Replay(%d)", after), replayAll(t, l, after), want)
		}
		checkRecords(t, "Replay(MaxUint64)", replayAll(t, l, math.MaxUint64), nil)
		checkRecords(t, "Replay(MaxUint64-1)", replayAll(t, l, math.MaxUint64-1), nil)
	}
	check(l)
	l.Close()
	l = mustOpen(t, path, Options{})
	if l.Position() != uint64(len(batches)) {
		t.Fatalf("reopened at %d, want %d", l.Position(), len(batches))
	}
	check(l)
}

// The values of a chunked batch alias the writer's buffer until commit;
// the two buffers alternate, so later batches overwrite the memory of
// earlier ones. Distinct batches must replay intact (bbolt copies values
// into pages at commit and keeps no reference), and a batch whose commit
// fails leaves none of its chunks behind.
func TestReviewChunkedBatchesSurviveBufferReuseAndFailedCommits(t *testing.T) {
	path := tempPath(t)
	failAt := uint64(4)
	l := mustOpen(t, path, Options{BeforeCommit: func(seq uint64) error {
		if seq == failAt {
			return errors.New("injected")
		}
		return nil
	}})
	batches := reviewBatches(t, l, 3)
	w := make(chanWaiter, 1)
	l.Append(bigBatch("lost", 3000), w)
	if err := <-w; !errors.Is(err, ErrFailed) {
		t.Fatalf("commit of batch 4: %v, want ErrFailed", err)
	}
	l.Close()
	l = mustOpen(t, path, Options{})
	if l.Position() != 3 {
		t.Fatalf("position %d, want 3", l.Position())
	}
	for _, k := range logKeys(t, l) {
		if seq, _, _ := parseLogKey(k); seq > 3 {
			t.Fatalf("key %x of the failed batch is on disk", k)
		}
	}
	checkRecords(t, "Replay(0)", replayAll(t, l, 0), flatten(batches))
	more := reviewBatches(t, l, 3) // batch 4 again, then 5 and 6
	checkRecords(t, "Replay(0) after more", replayAll(t, l, 0), flatten(append(batches, more...)))
}

// TruncateTx(upTo) removes exactly the keys of batches <= upTo (all their
// chunks) and keeps every key after; reopening gives the right position
// whether the last key is a chunk key or the log is empty.
func TestReviewTruncateRemovesExactlyTheChunksUpTo(t *testing.T) {
	path := tempPath(t)
	l := mustOpen(t, path, Options{})
	batches := reviewBatches(t, l, 2)
	appendWait(t, l, Record{Name: "small3"})
	batches = append(batches, []Record{{Name: "small3"}})
	batches = append(batches, reviewBatches(t, l, 2)...)
	all := logKeys(t, l)
	for upTo := uint64(0); upTo <= uint64(len(batches)); upTo++ {
		if err := l.DB().Update(func(tx *bolt.Tx) error { return l.TruncateTx(tx, upTo) }); err != nil {
			t.Fatal(err)
		}
		var want [][]byte
		for _, k := range all {
			if seq, _, _ := parseLogKey(k); seq > upTo {
				want = append(want, k)
			}
		}
		if got := logKeys(t, l); !slices.EqualFunc(got, want, bytes.Equal) {
			t.Fatalf("after TruncateTx(%d): %d keys, want %d", upTo, len(got), len(want))
		}
		checkRecords(t, fmt.Sprintf("Replay(0) after TruncateTx(%d)", upTo), replayAll(t, l, 0), flatten(batches[upTo:]))
		l.Close()
		l = mustOpen(t, path, Options{})
		if l.Position() != uint64(len(batches)) {
			t.Fatalf("after TruncateTx(%d) and reopening: position %d, want %d", upTo, l.Position(), len(batches))
		}
	}
	appendWait(t, l, bigBatch("next", 2000)...)
	if l.Position() != uint64(len(batches)+1) {
		t.Fatalf("position %d after an append, want %d", l.Position(), len(batches)+1)
	}
}

// A log holding only continuation keys: Open takes its position from them,
// Replay reports the batch by number and delivers nothing, TruncateTx
// removes them.
func TestReviewLogOfOnlyContinuationKeys(t *testing.T) {
	path := tempPath(t)
	l := mustOpen(t, path, Options{})
	l.Close()
	rawUpdate(t, path, func(_, lb *bolt.Bucket) error {
		for i := uint32(1); i <= 3; i++ {
			if err := lb.Put(chunkKey(7, i), []byte("chunk")); err != nil {
				return err
			}
		}
		return nil
	})
	l = mustOpen(t, path, Options{})
	if l.Position() != 7 {
		t.Fatalf("position %d, want 7", l.Position())
	}
	n := 0
	err := l.Replay(0, func(Record) error { n++; return nil })
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "batch 7") || n != 0 {
		t.Fatalf("Replay: %v after %d records, want ErrCorrupt naming batch 7 and none", err, n)
	}
	if got := replayAll(t, l, 7); len(got) != 0 {
		t.Fatalf("Replay(7) delivered %d records", len(got))
	}
	if err := l.DB().Update(func(tx *bolt.Tx) error { return l.TruncateTx(tx, 6) }); err != nil {
		t.Fatal(err)
	}
	if len(logKeys(t, l)) != 3 {
		t.Fatal("TruncateTx(6) removed chunks of batch 7")
	}
	if err := l.DB().Update(func(tx *bolt.Tx) error { return l.TruncateTx(tx, 7) }); err != nil {
		t.Fatal(err)
	}
	if len(logKeys(t, l)) != 0 {
		t.Fatal("TruncateTx(7) left chunks of batch 7")
	}
	appendWait(t, l, Record{Name: "eight"})
	if l.Position() != 8 {
		t.Fatalf("position %d, want 8", l.Position())
	}
}

// Keys of any shape other than 8 bytes, or 12 bytes with a chunk index
// above 0, make Replay (if at or after its start) and TruncateTx fail with
// ErrCorrupt (never panic), and make Open fail when they are the last key.
func TestReviewMisshapenKeys(t *testing.T) {
	prefix := binary.BigEndian.AppendUint64(nil, 2)
	keys := map[string][]byte{
		"first, 1 byte":    {0},
		"first, 7 bytes":   prefix[:7],
		"last, 7 bytes":    {0, 0, 0, 0, 0, 0, 1},
		"9 bytes":          append(slices.Clone(prefix), 1),
		"11 bytes":         append(slices.Clone(prefix), 0, 0, 1),
		"12, chunk 0":      binary.BigEndian.AppendUint32(slices.Clone(prefix), 0),
		"13 bytes":         append(binary.BigEndian.AppendUint32(slices.Clone(prefix), 1), 0),
		"16 bytes":         binary.BigEndian.AppendUint64(slices.Clone(prefix), 1),
		"last, 12 chunk 0": binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint64(nil, 9), 0),
		"last, 1 byte":     {0xff},
	}
	for name, key := range keys {
		t.Run(name, func(t *testing.T) {
			path := tempPath(t)
			l := mustOpen(t, path, Options{})
			appendWait(t, l, Record{Name: "one"})
			appendWait(t, l, bigBatch("two", 2000)...)
			appendWait(t, l, Record{Name: "three"})
			if err := l.DB().Update(func(tx *bolt.Tx) error { return tx.Bucket(logBucket).Put(key, []byte("x")) }); err != nil {
				t.Fatal(err)
			}
			// A key sorting before batch 1 is below every Replay's seek.
			first := strings.HasPrefix(name, "first")
			if err := l.Replay(0, func(Record) error { return nil }); first != (err == nil) || !first && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Replay with key %x: %v", key, err)
			}
			err := l.DB().Update(func(tx *bolt.Tx) error { return l.TruncateTx(tx, 3) })
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("TruncateTx over key %x: %v, want ErrCorrupt", key, err)
			}
			last := strings.HasPrefix(name, "last")
			l.Close()
			l2, err := Open(path, Options{})
			if last != errors.Is(err, ErrCorrupt) {
				if l2 != nil {
					l2.Close()
				}
				t.Fatalf("Open with key %x last=%v: %v", key, last, err)
			}
			if l2 != nil {
				l2.Close()
			}
		})
	}
}

// The assembler's memory is bounded by MaxBatchPayload whatever the number
// of chunks claimed: values are only referenced until the bound, and a
// chunk index out of sequence (such as 2^32-1) is refused at once.
func TestReviewAssemblerBounds(t *testing.T) {
	var a assembler
	if err := a.add(1, 0, make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	if err := a.add(1, math.MaxUint32, nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("chunk 2^32-1 after chunk 0: %v, want ErrCorrupt", err)
	}
	a = assembler{}
	big := make([]byte, 1<<20) // shared by every chunk: nothing is copied before take
	var err error
	i := uint32(0)
	for ; err == nil && i < 1000; i++ {
		err = a.add(5, i, big)
	}
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "batch 5") {
		t.Fatalf("after %d MiB chunks: %v, want ErrCorrupt naming batch 5", i, err)
	}
	if a.size > BatchHeaderSize+MaxBatchPayload || int(i) > MaxBatchPayload>>20+2 {
		t.Fatalf("assembled %d bytes in %d chunks before refusing", a.size, i)
	}
}

// Open upgrades only files it accepts: a version 1 file that fails to open
// stays version 1, a newer one stays as it is, version 0 is ErrCorrupt and
// not rewritten; an accepted version 1 file replays and becomes version 2.
func TestReviewVersionUpgradeOnlyOnSuccess(t *testing.T) {
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
	}{{0, ErrCorrupt}, {3, ErrVersion}, {math.MaxUint32, ErrVersion}} {
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
