package wal

// Replay and truncation (replay.go), over whole and chunked batches and
// every kind of broken log.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

func TestTruncate(t *testing.T) {
	path := tempPath(t)
	l := mustOpen(t, path, Options{})
	for i := range 5 {
		appendWait(t, l, Record{Name: "t", Shard: uint32(i + 1)})
	}
	if err := l.DB().Update(func(tx *bolt.Tx) error { return l.TruncateTx(tx, 3) }); err != nil {
		t.Fatal(err)
	}
	got := replayAll(t, l, 0)
	if len(got) != 2 || got[0].Shard != 4 || got[1].Shard != 5 {
		t.Fatalf("after truncating to 3: %+v", got)
	}
	err := l.DB().Update(func(tx *bolt.Tx) error { return l.TruncateTx(tx, 6) })
	if !errors.Is(err, ErrPosition) {
		t.Fatalf("truncate past position: %v", err)
	}
	if err := l.DB().Update(func(tx *bolt.Tx) error { return l.TruncateTx(tx, 5) }); err != nil {
		t.Fatal(err)
	}
	l.Close()

	// An emptied log keeps its position: sequence numbers never repeat.
	l = mustOpen(t, path, Options{})
	if l.Position() != 5 || len(replayAll(t, l, 0)) != 0 {
		t.Fatalf("reopened empty log: position %d", l.Position())
	}
	appendWait(t, l, Record{Name: "t", Shard: 6})
	if l.Position() != 6 {
		t.Fatalf("position %d, want 6", l.Position())
	}
	if got := replayAll(t, l, 5); len(got) != 1 || got[0].Shard != 6 {
		t.Fatalf("Replay(5) = %+v", got)
	}
}

// Continues accepts a snapshot position from which the log holds every
// later batch, and refuses one the log was truncated beyond, one beyond
// the log's position, and one the next batch does not follow.
func TestContinues(t *testing.T) {
	l := mustOpen(t, tempPath(t), Options{})
	for i := range 6 {
		appendWait(t, l, Record{Name: fmt.Sprint("b", i+1)})
	}
	if err := l.DB().Update(func(tx *bolt.Tx) error { return l.TruncateTx(tx, 3) }); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		pos uint64
		ok  bool
	}{{3, true}, {5, true}, {6, true}, {2, false}, {0, false}, {7, false}} {
		if err := l.Continues(c.pos); c.ok != (err == nil) || !c.ok && !errors.Is(err, ErrCorrupt) {
			t.Errorf("Continues(%d) = %v, want ok %v", c.pos, err, c.ok)
		}
	}
	if err := l.DB().Update(func(tx *bolt.Tx) error { // batch 5 gone
		var k [8]byte
		binary.BigEndian.PutUint64(k[:], 5)
		return tx.Bucket(logBucket).Delete(k[:])
	}); err != nil {
		t.Fatal(err)
	}
	if err := l.Continues(4); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Continues(4) without batch 5 = %v, want ErrCorrupt", err)
	}
}

// A log whose last batches are gone (damage bbolt cannot see, such as a
// page's entry count lowered) is refused at Open: the meta bucket names
// the last batch committed. An emptied log (TruncateTx) is not.
func TestOpenRefusesALostLogTail(t *testing.T) {
	path := tempPath(t)
	l := mustOpen(t, path, Options{})
	for i := range 5 {
		appendWait(t, l, Record{Name: fmt.Sprint("b", i+1)})
	}
	if err := l.DB().Update(func(tx *bolt.Tx) error {
		var k [8]byte
		binary.BigEndian.PutUint64(k[:], 5)
		return tx.Bucket(logBucket).Delete(k[:])
	}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if l, err := Open(path, Options{}); !errors.Is(err, ErrCorrupt) {
		if err == nil {
			l.Close()
		}
		t.Fatalf("Open of a log missing its last batch: %v, want ErrCorrupt", err)
	}
	path = tempPath(t)
	l = mustOpen(t, path, Options{})
	appendWait(t, l, Record{Name: "only"})
	if err := l.DB().Update(func(tx *bolt.Tx) error { return l.TruncateTx(tx, 1) }); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l = mustOpen(t, path, Options{})
	if l.Position() != 1 {
		t.Errorf("an emptied log reopens at %d, want 1", l.Position())
	}
}

// TruncateTx removes batches spread over many leaves in one transaction,
// with chunked batches among them, as a snapshot after a long run does,
// and keeps exactly those after upTo: the deletions walk the log once.
func TestTruncateManyLeaves(t *testing.T) {
	l := mustOpen(t, tempPath(t), Options{})
	l.db.NoSync = true // thousands of commits; durability is not what is tested
	var batches [][]Record
	for i := range 3000 {
		if i%500 == 250 {
			batches = append(batches, chunkedBatches(t, l, 1)...)
			continue
		}
		b := []Record{{Name: "many", Key: fmt.Sprintf("k%05d", i), Value: float64(i)}}
		appendWait(t, l, b...)
		batches = append(batches, b)
	}
	truncateAndCheck(t, l, 2600, logKeys(t, l), batches)
}

// TruncateTx over a log of mixed batches (one record or a few, values
// over a page, chunked ones), at every upTo, and again and again in one
// transaction (the deletions of the earlier calls leave emptied leaves
// ahead of the cursor), keeps exactly the keys after upTo.
func TestTruncateMixedBatches(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 99))
	l := mustOpen(t, tempPath(t), Options{})
	l.db.NoSync = true // hundreds of commits; durability is not what is tested
	const n = 600
	for i := range n {
		size := 1 + rng.IntN(8)
		switch x := rng.IntN(20); {
		case x == 0:
			size = 1000 + rng.IntN(3000) // chunked
		case x <= 3:
			size = 130 + rng.IntN(400) // one value over a page
		}
		appendWait(t, l, bigBatch(fmt.Sprintf("b%d", i), size)...)
	}
	all := logKeys(t, l)
	inTx := func(fn func(tx *bolt.Tx)) {
		tx, err := l.DB().Begin(true)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		fn(tx)
	}
	truncate := func(tx *bolt.Tx, upTo uint64) {
		if err := l.TruncateTx(tx, upTo); err != nil {
			t.Fatal(err)
		}
		if got, want := txLogKeys(t, tx), keysAfter(all, upTo); !slices.EqualFunc(got, want, bytes.Equal) {
			t.Fatalf("after TruncateTx(%d): %d keys, want %d", upTo, len(got), len(want))
		}
	}
	for upTo := range uint64(n + 1) {
		inTx(func(tx *bolt.Tx) { truncate(tx, upTo) })
	}
	inTx(func(tx *bolt.Tx) {
		for upTo := uint64(0); upTo <= n; upTo += uint64(1 + rng.IntN(40)) {
			truncate(tx, upTo)
		}
		truncate(tx, n)
	})
}

// A key of the log bucket that is no log key makes TruncateTx fail with
// ErrCorrupt, whatever its length, and nothing is removed.
func TestTruncateRefusesForeignKeys(t *testing.T) {
	seq1 := binary.BigEndian.AppendUint64(nil, 1)
	for _, bad := range [][]byte{
		append(slices.Clone(seq1), make([]byte, 9)...), // 17 bytes
		append(slices.Clone(seq1), 0, 0, 0, 0),         // a chunk key of index 0
		append(slices.Clone(seq1), 1, 2),               // 10 bytes
		{1, 2, 3},
	} {
		l := mustOpen(t, tempPath(t), Options{})
		appendWait(t, l, Record{Name: "a", Key: "b"})
		appendWait(t, l, Record{Name: "a", Key: "c"})
		if err := l.DB().Update(func(tx *bolt.Tx) error { return tx.Bucket(logBucket).Put(bad, []byte("x")) }); err != nil {
			t.Fatal(err)
		}
		before := logKeys(t, l)
		if err := l.DB().Update(func(tx *bolt.Tx) error { return l.TruncateTx(tx, 2) }); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("key %x: TruncateTx returned %v, want ErrCorrupt", bad, err)
		}
		if got := logKeys(t, l); !slices.EqualFunc(got, before, bytes.Equal) {
			t.Fatalf("key %x: a failed TruncateTx changed the log", bad)
		}
	}
}

// TruncateTx(upTo) removes exactly the keys of batches <= upTo (all their
// chunks) and keeps every key after; reopening gives the right position
// whether the last key is a chunk key or the log is empty.
func TestTruncateRemovesExactlyTheChunksUpTo(t *testing.T) {
	path := tempPath(t)
	l := mustOpen(t, path, Options{})
	batches := chunkedBatches(t, l, 2)
	appendWait(t, l, Record{Name: "small3"})
	batches = append(batches, []Record{{Name: "small3"}})
	batches = append(batches, chunkedBatches(t, l, 2)...)
	all := logKeys(t, l)
	for upTo := uint64(0); upTo <= uint64(len(batches)); upTo++ {
		truncateAndCheck(t, l, upTo, all, batches)
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

func TestReplayRejectsCorruptBatch(t *testing.T) {
	l := mustOpen(t, tempPath(t), Options{})
	appendWait(t, l, Record{Name: "good"})
	put := func(seq uint64, v []byte) {
		t.Helper()
		err := l.DB().Update(func(tx *bolt.Tx) error {
			return tx.Bucket(logBucket).Put(binary.BigEndian.AppendUint64(nil, seq), v)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	bad := EncodeBatch(nil, []Record{{Name: "bad"}})
	bad[len(bad)-1] ^= 0x40
	put(2, bad)
	var got []Record
	err := l.Replay(0, func(r Record) error { got = append(got, r); return nil })
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "batch 2") {
		t.Fatalf("err = %v", err)
	}
	if len(got) != 1 || got[0].Name != "good" {
		t.Fatalf("records before the bad batch: %+v", got)
	}

	put(2, EncodeBatch(nil, []Record{{Name: "two"}}))
	put(4, EncodeBatch(nil, []Record{{Name: "four"}})) // a gap
	if err := l.Replay(0, func(Record) error { return nil }); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("gap: err = %v", err)
	}
}

func TestReplayRejectsBrokenChunks(t *testing.T) {
	cases := []struct {
		name    string
		breakIt func(lb *bolt.Bucket) error
		want    string
	}{
		{"missing middle chunk", func(lb *bolt.Bucket) error {
			return lb.Delete(chunkKey(2, 3))
		}, "batch 2: chunk 4 follows chunk 2"},
		{"missing first value", func(lb *bolt.Bucket) error {
			return lb.Delete(chunkKey(2, 0))
		}, "batch 2: chunk 1 without its first value"},
		{"missing last chunk", func(lb *bolt.Bucket) error {
			c := lb.Cursor()
			c.Seek(chunkKey(3, 0))
			k, _ := c.Prev()
			return lb.Delete(k)
		}, "batch 2"},
		{"chunk index 0 in a long key", func(lb *bolt.Bucket) error {
			return lb.Put(binary.BigEndian.AppendUint32(chunkKey(2, 0), 0), []byte("x"))
		}, "is not a batch key"},
		{"extra chunk after a whole batch", func(lb *bolt.Bucket) error {
			return lb.Put(chunkKey(3, 1), []byte("x"))
		}, "batch 3: wal: corrupt"},
		{"flipped byte in a chunk", func(lb *bolt.Bucket) error {
			v := bytes.Clone(lb.Get(chunkKey(2, 2)))
			v[10] ^= 0x01
			return lb.Put(chunkKey(2, 2), v)
		}, "batch 2: wal: corrupt"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := mustOpen(t, tempPath(t), Options{})
			appendWait(t, l, Record{Name: "one"})
			appendWait(t, l, bigBatch("two", 2000)...)
			appendWait(t, l, Record{Name: "three"})
			if err := l.DB().Update(func(tx *bolt.Tx) error { return tc.breakIt(tx.Bucket(logBucket)) }); err != nil {
				t.Fatal(err)
			}
			var got []Record
			err := l.Replay(0, func(r Record) error { got = append(got, r); return nil })
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrCorrupt mentioning %q", err, tc.want)
			}
			// Every record of the batches before the broken one, none of it.
			delivered := 1 // batch 1
			if strings.Contains(tc.want, "batch 3") {
				delivered += 2000 // and batch 2
			}
			if len(got) != delivered {
				t.Fatalf("delivered %d records before the error, want %d", len(got), delivered)
			}
		})
	}
}

// A malformed key that cannot belong to the batch being assembled must not
// stop Replay before that batch: the batch is complete and sorts entirely
// before the bad key, and Replay promises that fn has seen every record of
// every earlier batch (it was once dropped). The key "zz"
// sorts after every 8- and 12-byte key (its first byte is above that of any
// sequence number below 2^56).
func TestReplayDeliversCompleteBatchBeforeAMalformedKey(t *testing.T) {
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
func TestReplayFromEveryPositionOfChunkedRuns(t *testing.T) {
	path := tempPath(t)
	l := mustOpen(t, path, Options{})
	if got := replayAll(t, l, 0); len(got) != 0 {
		t.Fatalf("empty log replayed %d records", len(got))
	}
	batches := chunkedBatches(t, l, 5)
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

// A log holding only continuation keys: Open takes its position from them,
// Replay reports the batch by number and delivers nothing, TruncateTx
// removes them.
func TestLogOfOnlyContinuationKeys(t *testing.T) {
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
func TestMisshapenKeys(t *testing.T) {
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
