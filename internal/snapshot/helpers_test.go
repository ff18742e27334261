package snapshot

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/seed7fbd42b6/ratelimit/internal/wal"
)

func openDB(t *testing.T) *bolt.DB {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "s.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func records(n int, tag string) []wal.Record {
	recs := make([]wal.Record, n)
	for i := range recs {
		recs[i] = wal.Record{Name: tag, Key: fmt.Sprintf("key-%06d", i), Shard: uint32(i % 4), Value: float64(i) / 2, TS: int64(i)}
	}
	return recs
}

func emitAll(recs []wal.Record) func(func(wal.Record) error) error {
	return func(emit func(wal.Record) error) error {
		for _, r := range recs {
			if err := emit(r); err != nil {
				return err
			}
		}
		return nil
	}
}

func load(t *testing.T, db *bolt.DB) (uint64, []wal.Record) {
	t.Helper()
	var got []wal.Record
	pos, err := Load(db, func(r wal.Record) error { got = append(got, r); return nil })
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return pos, got
}

func check(t *testing.T, got, want []wal.Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("loaded %d records, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("record %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

type chanWaiter chan error

func (c chanWaiter) Committed(err error) { c <- err }

func clone(b []byte) []byte { return append([]byte(nil), b...) }

// key is the key of chunk i of the tests' snapshots, written at position 3.
func key(i uint64) []byte { return chunkKey(i, 3) }

func lastChunk(root *bolt.Bucket) uint64 {
	k, _ := root.Bucket(chunksBucket).Cursor().Last()
	i, _, _, _ := parseChunkKey(k)
	return i
}

// writeV1 stores recs as a version 1 snapshot at pos, as versions before
// chunk keys carried their position wrote it: chunks of at most per
// records under 8-byte keys.
func writeV1(t *testing.T, db *bolt.DB, pos uint64, recs []wal.Record, per int) {
	t.Helper()
	head, chunks := v1Entries(pos, recs, per)
	err := db.Update(func(tx *bolt.Tx) error {
		if tx.Bucket(rootBucket) != nil {
			if err := tx.DeleteBucket(rootBucket); err != nil {
				return err
			}
		}
		root, err := tx.CreateBucket(rootBucket)
		if err != nil {
			return err
		}
		c, err := root.CreateBucket(chunksBucket)
		if err != nil {
			return err
		}
		for _, e := range chunks {
			if err := c.Put(e.Key, e.Value); err != nil {
				return err
			}
		}
		return root.Put(headKey, head)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// v1Entries is a version 1 snapshot's head value and chunk entries.
func v1Entries(pos uint64, recs []wal.Record, per int) (head []byte, chunks []wal.Entry) {
	for i := 0; i < len(recs); i += per {
		var b wal.BatchBuilder
		for _, r := range recs[i:min(i+per, len(recs))] {
			b.Add(r)
		}
		chunks = append(chunks, wal.Entry{Key: binary.BigEndian.AppendUint64(nil, uint64(len(chunks))), Value: b.Bytes()})
	}
	return headV(1, pos, uint64(len(chunks)), uint64(len(recs))), chunks
}

func headV(version uint32, pos, chunks, records uint64) []byte {
	return head{version: version, pos: pos, chunks: chunks, records: records}.encode()
}

// entries reads the stored snapshot's head value and chunk entries, as
// salvage reads them from the pages.
func entries(t *testing.T, db *bolt.DB) (head []byte, chunks []wal.Entry) {
	t.Helper()
	err := db.View(func(tx *bolt.Tx) error {
		root := tx.Bucket(rootBucket)
		head = clone(root.Get(headKey))
		return root.Bucket(chunksBucket).ForEach(func(k, v []byte) error {
			chunks = append(chunks, wal.Entry{Key: clone(k), Value: clone(v)})
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return head, chunks
}
