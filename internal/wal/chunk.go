package wal

import (
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// How a batch maps onto keys of the log bucket (format version 2).
//
// A batch of up to chunkOver pages is one value under its 8-byte sequence
// number, as in format version 1. A larger batch is cut into chunks: the
// first under the 8-byte sequence number, chunk i >= 1 under the sequence
// number followed by i (uint32 big-endian), so the chunks sort in order
// right after the first. Concatenated, they are the batch encoding.
//
// Why: bbolt keeps at least two entries in a leaf, so a batch stored as
// one value larger than a page shares an overflow leaf with up to three
// earlier batches, and every commit copies and writes those again. Chunks
// of half a page fill leaves two by two and are written once. Small
// batches stay whole: cutting them saves less of bbolt's work than the
// extra page writes cost.

const (
	seqKeyLen   = 8  // a batch's first (or only) value
	chunkKeyLen = 12 // sequence number + chunk index
	// chunkOver is the batch size, in pages, above which a batch is cut.
	chunkOver = 4
	// Overheads bbolt puts beside each leaf element, used only to size
	// chunks so that two of them and their keys fill one page. A wrong
	// guess costs space, never correctness.
	leafPageHeader = 16
	leafElemHeader = 16
)

// chunkSize returns the size of each chunk of a large batch for a file of
// the given page size: two chunks with their 12-byte keys fill a leaf page.
func chunkSize(pageSize int) int {
	return max((pageSize-leafPageHeader)/2-leafElemHeader-chunkKeyLen, 64)
}

// putBatch stores batch as log entry seq in tx (see above), marking the
// file version 2 in the same transaction if this is its first chunked
// batch. The values alias batch, which must stay unchanged until the
// transaction commits. If the transaction then fails, the log has failed
// for good, so l.version running ahead of the file does no harm.
func (l *Log) putBatch(tx *bolt.Tx, seq uint64, batch []byte) error {
	lb := tx.Bucket(logBucket)
	lb.FillPercent = 1.0
	k := l.key[:]
	binary.BigEndian.PutUint64(k, seq)
	if len(batch) <= chunkOver*l.pageSize {
		return lb.Put(k[:seqKeyLen], batch)
	}
	if l.version < chunkedVersion {
		if err := putVersion(tx.Bucket(metaBucket), chunkedVersion); err != nil {
			return err
		}
		l.version = chunkedVersion
	}
	size := chunkSize(l.pageSize)
	if err := lb.Put(k[:seqKeyLen], batch[:size]); err != nil {
		return err
	}
	for i, off := uint32(1), size; off < len(batch); i, off = i+1, off+size {
		binary.BigEndian.PutUint32(k[seqKeyLen:], i)
		if err := lb.Put(k, batch[off:min(off+size, len(batch))]); err != nil {
			return err
		}
	}
	return nil
}

// parseLogKey returns the sequence number of a log bucket key and its
// chunk index (0 for the first or only value of a batch). Any other key,
// including a 12-byte key with index 0 (never written), is ErrCorrupt.
func parseLogKey(k []byte) (seq uint64, chunk uint32, err error) {
	switch len(k) {
	case seqKeyLen:
		return binary.BigEndian.Uint64(k), 0, nil
	case chunkKeyLen:
		if chunk = binary.BigEndian.Uint32(k[seqKeyLen:]); chunk != 0 {
			return binary.BigEndian.Uint64(k), chunk, nil
		}
	}
	if len(k) >= seqKeyLen {
		return 0, 0, fmt.Errorf("%w: log key %x (batch %d) is not a batch key", ErrCorrupt, k, binary.BigEndian.Uint64(k))
	}
	return 0, 0, fmt.Errorf("%w: log key %x is not a batch key", ErrCorrupt, k)
}

// assembler joins the values of one batch read in key order. Its values
// alias the read transaction's pages; a batch of one value is not copied.
type assembler struct {
	seq   uint64 // batch being assembled; valid while parts is not empty
	parts [][]byte
	size  int
	buf   []byte // reused to join a chunked batch
}

// add takes the next key and value of the log. A new batch's first value
// (chunk 0) may come only once the batch before it has been taken.
func (a *assembler) add(seq uint64, chunk uint32, v []byte) error {
	switch {
	case chunk != 0 && !a.open():
		return fmt.Errorf("%w: log batch %d: chunk %d without its first value", ErrCorrupt, seq, chunk)
	case chunk != 0 && int(chunk) != len(a.parts):
		return fmt.Errorf("%w: log batch %d: chunk %d follows chunk %d", ErrCorrupt, seq, chunk, len(a.parts)-1)
	case a.size+len(v) > BatchHeaderSize+MaxBatchPayload:
		return fmt.Errorf("%w: log batch %d exceeds %d bytes", ErrCorrupt, seq, BatchHeaderSize+MaxBatchPayload)
	}
	a.seq = seq
	a.parts = append(a.parts, v)
	a.size += len(v)
	return nil
}

// open reports whether a batch is being assembled.
func (a *assembler) open() bool { return len(a.parts) != 0 }

// take returns the assembled batch and empties a. The result is valid
// until the next take.
func (a *assembler) take() (seq uint64, batch []byte) {
	seq, batch = a.seq, a.parts[0]
	if len(a.parts) > 1 {
		a.buf = a.buf[:0]
		for _, p := range a.parts {
			a.buf = append(a.buf, p...)
		}
		batch = a.buf
	}
	clear(a.parts)
	a.parts, a.size = a.parts[:0], 0
	return seq, batch
}
