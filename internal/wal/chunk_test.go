package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// bigBatch returns n records whose encoding is well above chunkOver pages
// for n >= 1000 (each record is ~30 bytes).
func bigBatch(tag string, n int) []Record {
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = Record{Name: tag, Key: fmt.Sprintf("k%06d", i), Value: float64(i), TS: int64(i)}
	}
	return recs
}

// logKeys lists the log bucket's keys.
func logKeys(t *testing.T, l *Log) [][]byte {
	t.Helper()
	var keys [][]byte
	err := l.DB().View(func(tx *bolt.Tx) error {
		return tx.Bucket(logBucket).ForEach(func(k, _ []byte) error {
			keys = append(keys, bytes.Clone(k))
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

func TestLargeBatchesAreChunkedAndReplayWhole(t *testing.T) {
	path := tempPath(t)
	l := mustOpen(t, path, Options{})
	small1 := []Record{{Name: "small", Key: "a", Value: 1}}
	big2 := bigBatch("big2", 2000)
	small3 := []Record{{Name: "small", Key: "b", Value: 3}}
	big4 := bigBatch("big4", 1500)
	want := [][]Record{small1, big2, small3, big4}
	for _, recs := range want {
		appendWait(t, l, recs...)
	}

	// Keys: one per small batch, one per chunk of a big one, in order.
	size2 := len(EncodeBatch(nil, big2))
	if size2 <= chunkOver*l.pageSize {
		t.Fatalf("test batch of %d bytes is not above the chunking size %d", size2, chunkOver*l.pageSize)
	}
	chunks2 := (size2 + chunkSize(l.pageSize) - 1) / chunkSize(l.pageSize)
	keys := logKeys(t, l)
	perSeq := map[uint64]int{}
	for _, k := range keys {
		seq, chunk, err := parseLogKey(k)
		if err != nil {
			t.Fatal(err)
		}
		if int(chunk) != perSeq[seq] {
			t.Fatalf("batch %d: chunk %d where %d was due", seq, chunk, perSeq[seq])
		}
		perSeq[seq]++
	}
	if perSeq[1] != 1 || perSeq[3] != 1 || perSeq[2] != chunks2 || perSeq[4] < 2 {
		t.Fatalf("values per batch %v, want 1, %d, 1, >1", perSeq, chunks2)
	}

	check := func(l *Log, after uint64, batches [][]Record) {
		t.Helper()
		checkRecords(t, fmt.Sprintf("Replay(%d)", after), replayAll(t, l, after), flatten(batches))
	}
	check(l, 0, want)
	check(l, 1, want[1:]) // starts exactly at a chunked batch
	check(l, 2, want[2:]) // skips a chunked batch's continuation keys
	l.Close()

	l = mustOpen(t, path, Options{})
	if l.Position() != 4 {
		t.Fatalf("reopened position %d, want 4 (the last key is a chunk key)", l.Position())
	}
	check(l, 0, want)

	// Truncation drops every value of a chunked batch.
	if err := l.DB().Update(func(tx *bolt.Tx) error { return l.TruncateTx(tx, 2) }); err != nil {
		t.Fatal(err)
	}
	for _, k := range logKeys(t, l) {
		if seq, _, _ := parseLogKey(k); seq <= 2 {
			t.Fatalf("key %x of batch %d survived truncation to 2", k, seq)
		}
	}
	check(l, 0, want[2:])
	appendWait(t, l, small1...)
	if l.Position() != 5 {
		t.Fatalf("position %d, want 5", l.Position())
	}
}

// The point of chunking: a commit writes about its own batch, not the
// batches that share its leaf. Stored as one value, a 44 KB batch costs
// ~4.8x its size in allocated pages per commit; chunked, ~1.5x.
func TestChunkingBoundsPagesWrittenPerCommit(t *testing.T) {
	l := mustOpen(t, tempPath(t), Options{})
	recs := bigBatch("amp", 1500)
	size := len(EncodeBatch(nil, recs))
	appendWait(t, l, recs...) // the bucket's first pages
	pageAlloc := func() int64 { s := l.DB().Stats(); return s.TxStats.GetPageAlloc() }
	before := pageAlloc()
	const commits = 40
	for range commits {
		appendWait(t, l, recs...)
	}
	perCommit := float64(pageAlloc()-before) / commits
	if ratio := perCommit / float64(size); ratio > 2 {
		t.Fatalf("%.0f bytes of pages allocated per commit of a %d-byte batch (%.1fx)", perCommit, size, ratio)
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

// chunkKey is the log key of chunk i of batch seq.
func chunkKey(seq uint64, i uint32) []byte {
	k := binary.BigEndian.AppendUint64(nil, seq)
	if i == 0 {
		return k
	}
	return binary.BigEndian.AppendUint32(k, i)
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
