package wal

// Chunked batches (chunk.go): large batches are stored as several values
// and assembled whole.

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

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

// The values of a chunked batch alias the writer's buffer until commit;
// the two buffers alternate, so later batches overwrite the memory of
// earlier ones. Distinct batches must replay intact (bbolt copies values
// into pages at commit and keeps no reference), and a batch whose commit
// fails leaves none of its chunks behind.
func TestChunkedBatchesSurviveBufferReuseAndFailedCommits(t *testing.T) {
	path := tempPath(t)
	failAt := uint64(4)
	l := mustOpen(t, path, Options{BeforeCommit: func(seq uint64) error {
		if seq == failAt {
			return errors.New("injected")
		}
		return nil
	}})
	batches := chunkedBatches(t, l, 3)
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
	more := chunkedBatches(t, l, 3) // batch 4 again, then 5 and 6
	checkRecords(t, "Replay(0) after more", replayAll(t, l, 0), flatten(append(batches, more...)))
}

// The assembler's memory is bounded by MaxBatchPayload whatever the number
// of chunks claimed: values are only referenced until the bound, and a
// chunk index out of sequence (such as 2^32-1) is refused at once.
func TestAssemblerBounds(t *testing.T) {
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
