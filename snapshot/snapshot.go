package snapshot

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"runtime/debug"

	bolt "go.etcd.io/bbolt"

	"github.com/seed7fbd42b6/ratelimit/wal"
)

// Version is the snapshot format version stored in the head.
const Version = 1

// ChunkSize is the encoded size at which a chunk is closed; a chunk holds
// whole records, so one holding a record larger than this is larger.
const ChunkSize = 64 << 10

var (
	rootBucket   = []byte("snapshot")
	chunksBucket = []byte("chunks")
	headKey      = []byte("head")
)

const headSize = 4 + 8 + 8 + 8 + 4

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// head describes the stored snapshot.
type head struct {
	pos, chunks, records uint64
}

func (h head) encode() []byte {
	b := make([]byte, 0, headSize)
	b = binary.BigEndian.AppendUint32(b, Version)
	b = binary.BigEndian.AppendUint64(b, h.pos)
	b = binary.BigEndian.AppendUint64(b, h.chunks)
	b = binary.BigEndian.AppendUint64(b, h.records)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func decodeHead(b []byte) (head, error) {
	if len(b) != headSize {
		return head{}, fmt.Errorf("%w: head is %d bytes", ErrCorrupt, len(b))
	}
	if crc32.Checksum(b[:headSize-4], castagnoli) != binary.BigEndian.Uint32(b[headSize-4:]) {
		return head{}, fmt.Errorf("%w: head checksum", ErrCorrupt)
	}
	if v := binary.BigEndian.Uint32(b); v != Version {
		if v > Version {
			return head{}, fmt.Errorf("%w: version %d (max %d)", ErrVersion, v, Version)
		}
		return head{}, fmt.Errorf("%w: version %d", ErrCorrupt, v)
	}
	return head{
		pos:     binary.BigEndian.Uint64(b[4:]),
		chunks:  binary.BigEndian.Uint64(b[12:]),
		records: binary.BigEndian.Uint64(b[20:]),
	}, nil
}

// Write replaces the stored snapshot in one bbolt transaction: it stores
// every record each emits, tagged with log position pos, drops the previous
// snapshot, runs alsoInTx (if not nil) in the same transaction, and
// commits. If each, emit, alsoInTx or the commit fails, nothing changes and
// the error is returned. emit must not be called after each returns.
//
// The transaction holds bbolt's writer lock while each runs: log commits
// on the same file wait for it.
func Write(db *bolt.DB, pos uint64, each func(emit func(wal.Record) error) error, alsoInTx func(*bolt.Tx) error) error {
	return db.Update(func(tx *bolt.Tx) error {
		if tx.Bucket(rootBucket) != nil {
			if err := tx.DeleteBucket(rootBucket); err != nil {
				return err
			}
		}
		root, err := tx.CreateBucket(rootBucket)
		if err != nil {
			return err
		}
		chunks, err := root.CreateBucket(chunksBucket)
		if err != nil {
			return err
		}
		chunks.FillPercent = 1.0
		w := chunkWriter{bucket: chunks}
		if err := each(w.emit); err != nil {
			return err
		}
		if err := w.flush(); err != nil {
			return err
		}
		if err := root.Put(headKey, head{pos: pos, chunks: w.chunks, records: w.records}.encode()); err != nil {
			return err
		}
		if alsoInTx != nil {
			return alsoInTx(tx)
		}
		return nil
	})
}

// chunkWriter packs records into chunks (wal batches) under sequential
// 8-byte big-endian keys 0, 1, 2, ...
type chunkWriter struct {
	bucket  *bolt.Bucket
	batch   wal.BatchBuilder
	chunks  uint64
	records uint64
}

func (w *chunkWriter) emit(r wal.Record) error {
	if err := wal.CheckRecord(r); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	w.batch.Add(r)
	w.records++
	if w.batch.Size() >= ChunkSize {
		return w.flush()
	}
	return nil
}

func (w *chunkWriter) flush() error {
	if w.batch.Len() == 0 {
		return nil
	}
	// bbolt keeps a reference to a Put value until the commit, so each
	// chunk gets its own buffer.
	if err := w.bucket.Put(binary.BigEndian.AppendUint64(nil, w.chunks), w.batch.Bytes()); err != nil {
		return err
	}
	w.chunks++
	w.batch = wal.BatchBuilder{}
	return nil
}

// Load streams the stored snapshot's records to fn in the order they were
// emitted, and returns the snapshot's log position; (0, nil) when there is
// no snapshot. Validation failures return an error wrapping ErrCorrupt
// (hence wal.ErrCorrupt) naming the chunk; fn has then seen the records of
// the chunks before it. An error from fn stops Load and is returned as is.
func Load(db *bolt.DB, fn func(wal.Record) error) (pos uint64, err error) {
	inFn := false
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			if inFn {
				panic(p)
			}
			pos, err = 0, fmt.Errorf("%w: bbolt panicked: %v", ErrCorrupt, p)
		}
	}()
	err = db.View(func(tx *bolt.Tx) error {
		root := tx.Bucket(rootBucket)
		if root == nil {
			return nil
		}
		h, err := decodeHead(root.Get(headKey))
		if err != nil {
			return err
		}
		chunks := root.Bucket(chunksBucket)
		if chunks == nil {
			return fmt.Errorf("%w: chunks bucket missing", ErrCorrupt)
		}
		var i, records uint64
		c := chunks.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if len(k) != 8 || binary.BigEndian.Uint64(k) != i {
				return fmt.Errorf("%w: chunk key %x, want chunk %d", ErrCorrupt, k, i)
			}
			var fnErr error
			err := wal.DecodeBatch(v, func(r wal.Record) error {
				records++
				inFn = true
				fnErr = fn(r)
				inFn = false
				return fnErr
			})
			if fnErr != nil {
				return fnErr
			}
			if err != nil {
				return fmt.Errorf("%w: chunk %d: %w", ErrCorrupt, i, err)
			}
			i++
		}
		if i != h.chunks || records != h.records {
			return fmt.Errorf("%w: %d chunks and %d records, head says %d and %d",
				ErrCorrupt, i, records, h.chunks, h.records)
		}
		pos = h.pos
		return nil
	})
	if err != nil {
		return 0, err
	}
	return pos, nil
}
