package snapshot

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"runtime/debug"

	bolt "go.etcd.io/bbolt"

	"github.com/seed7fbd42b6/ratelimit/internal/wal"
)

// Version is the snapshot format version Write stores in the head. Load
// and Salvage read versions 1 and 2 (see the package documentation).
const Version = 2

// ChunkSize is the encoded size at which a chunk is closed; a chunk holds
// whole records, so one holding a record larger than this is larger.
const ChunkSize = 64 << 10

// StagingTxBytes is about how much of a snapshot one staging transaction
// writes.
const StagingTxBytes = 1 << 20

var (
	stagingBucket = []byte("snapshot.staging")
	rootBucket    = []byte("snapshot")
	chunksBucket  = []byte("chunks")
	headKey       = []byte("head")
)

const headSize = 4 + 8 + 8 + 8 + 4

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// head describes the stored snapshot.
type head struct {
	version              uint32
	pos, chunks, records uint64
}

func (h head) encode() []byte {
	b := make([]byte, 0, headSize)
	b = binary.BigEndian.AppendUint32(b, h.version)
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
	v := binary.BigEndian.Uint32(b)
	if v > Version {
		return head{}, fmt.Errorf("%w: version %d (max %d)", ErrVersion, v, Version)
	}
	if v == 0 {
		return head{}, fmt.Errorf("%w: version 0", ErrCorrupt)
	}
	return head{
		version: v,
		pos:     binary.BigEndian.Uint64(b[4:]),
		chunks:  binary.BigEndian.Uint64(b[12:]),
		records: binary.BigEndian.Uint64(b[20:]),
	}, nil
}

// chunkKey is the key of chunk i of the snapshot at position pos: i, then
// (since version 2) pos, both 8 bytes big-endian. The position marks the
// chunk as that snapshot's, so that an older snapshot's chunk a damaged
// pointer or a lost page write leads to is told apart from it.
func chunkKey(i, pos uint64) []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(make([]byte, 0, 16), i), pos)
}

// parseChunkKey reads a chunk key of either version: its index, its
// position (0 in version 1, which has none) and its version; ok is false
// for a key of neither length.
func parseChunkKey(k []byte) (i, pos uint64, version uint32, ok bool) {
	switch len(k) {
	case 8:
		return binary.BigEndian.Uint64(k), 0, 1, true
	case 16:
		return binary.BigEndian.Uint64(k), binary.BigEndian.Uint64(k[8:]), 2, true
	}
	return 0, 0, 0, false
}

// Write replaces the stored snapshot: it stores every record each emits,
// tagged with log position pos, then, in one final transaction, drops the
// previous snapshot, puts the new one in its place and runs alsoInTx (if
// not nil; the caller truncates the log there). If each, emit, alsoInTx or
// a commit fails, the stored snapshot is unchanged and the error is
// returned. emit must not be called after each returns.
//
// The records are written into a staging bucket over several small
// transactions (about StagingTxBytes each), so log commits on the same file
// wait for one of them at a time, never for the whole snapshot. A staging
// bucket left by a crash is ignored by Load and replaced by the next Write.
func Write(db *bolt.DB, pos uint64, each func(emit func(wal.Record) error) error, alsoInTx func(*bolt.Tx) error) error {
	if err := db.Update(func(tx *bolt.Tx) error {
		if tx.Bucket(stagingBucket) != nil {
			if err := tx.DeleteBucket(stagingBucket); err != nil {
				return err
			}
		}
		staging, err := tx.CreateBucket(stagingBucket)
		if err != nil {
			return err
		}
		root, err := staging.CreateBucket(rootBucket)
		if err != nil {
			return err
		}
		_, err = root.CreateBucket(chunksBucket)
		return err
	}); err != nil {
		return err
	}
	w := chunkWriter{db: db, pos: pos}
	err := each(w.emit)
	if err == nil {
		err = w.flush()
	}
	if err == nil {
		err = db.Update(func(tx *bolt.Tx) error {
			if tx.Bucket(rootBucket) != nil {
				if err := tx.DeleteBucket(rootBucket); err != nil {
					return err
				}
			}
			if err := tx.MoveBucket(rootBucket, tx.Bucket(stagingBucket), nil); err != nil {
				return err
			}
			if err := tx.DeleteBucket(stagingBucket); err != nil {
				return err
			}
			// The head goes in after the move: a value put into a bucket
			// in the transaction that moves it does not survive the move
			// (bbolt v1.5).
			if err := tx.Bucket(rootBucket).Put(headKey, head{version: Version, pos: pos, chunks: w.chunks, records: w.records}.encode()); err != nil {
				return err
			}
			if alsoInTx != nil {
				return alsoInTx(tx)
			}
			return nil
		})
	}
	if err != nil {
		db.Update(func(tx *bolt.Tx) error { return tx.DeleteBucket(stagingBucket) }) // best effort
	}
	return err
}

// chunkWriter packs records into chunks (wal batches) under the keys
// chunkKey(0, pos), chunkKey(1, pos), ... of the staging snapshot,
// committing about every StagingTxBytes.
type chunkWriter struct {
	db      *bolt.DB
	pos     uint64
	batch   wal.BatchBuilder
	pending [][]byte // closed chunks not yet committed
	size    int      // their bytes
	chunks  uint64   // chunks committed
	records uint64
}

func (w *chunkWriter) emit(r wal.Record) error {
	if err := wal.CheckRecord(r); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	w.batch.Add(r)
	w.records++
	if w.batch.Size() >= ChunkSize {
		w.close()
		if w.size >= StagingTxBytes {
			return w.commit()
		}
	}
	return nil
}

// close ends the current chunk. bbolt keeps a reference to a Put value
// until the commit, so each chunk gets its own buffer.
func (w *chunkWriter) close() {
	if w.batch.Len() == 0 {
		return
	}
	b := w.batch.Bytes()
	w.pending = append(w.pending, b)
	w.size += len(b)
	w.batch = wal.BatchBuilder{}
}

// commit stores the pending chunks in one transaction.
func (w *chunkWriter) commit() error {
	if len(w.pending) == 0 {
		return nil
	}
	first := w.chunks
	err := w.db.Update(func(tx *bolt.Tx) error {
		chunks := tx.Bucket(stagingBucket).Bucket(rootBucket).Bucket(chunksBucket)
		chunks.FillPercent = 1.0
		for i, b := range w.pending {
			if err := chunks.Put(chunkKey(first+uint64(i), w.pos), b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	w.chunks += uint64(len(w.pending))
	clear(w.pending)
	w.pending, w.size = w.pending[:0], 0
	return nil
}

// flush closes and commits what is left.
func (w *chunkWriter) flush() error {
	w.close()
	return w.commit()
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
			if n, pos, v, ok := parseChunkKey(k); !ok || v != h.version || n != i || pos != h.pos && v >= 2 {
				return fmt.Errorf("%w: chunk key %x, want chunk %d of the version %d snapshot at %d", ErrCorrupt, k, i, h.version, h.pos)
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
