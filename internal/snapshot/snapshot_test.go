package snapshot

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/seed7fbd42b6/ratelimit/internal/wal"
)

func TestLoadWithoutSnapshot(t *testing.T) {
	if pos, got := load(t, openDB(t)); pos != 0 || len(got) != 0 {
		t.Fatalf("pos %d, %d records", pos, len(got))
	}
}

func TestWriteLoadRoundTrip(t *testing.T) {
	db := openDB(t)
	recs := records(20000, "a") // several chunks
	recs = append(recs,
		wal.Record{Name: "big", Key: strings.Repeat("k", 64<<10), Value: 1},
		wal.Record{Name: "", Key: "", Delete: true},
	)
	if err := Write(db, 42, emitAll(recs), nil); err != nil {
		t.Fatal(err)
	}
	pos, got := load(t, db)
	if pos != 42 {
		t.Fatalf("pos %d, want 42", pos)
	}
	check(t, got, recs)
	var chunks int
	db.View(func(tx *bolt.Tx) error {
		chunks = tx.Bucket(rootBucket).Bucket(chunksBucket).Stats().KeyN
		return nil
	})
	if chunks < 5 {
		t.Fatalf("%d chunks; expected the records split into ~64 KiB chunks", chunks)
	}
}

func TestEmptySnapshot(t *testing.T) {
	db := openDB(t)
	if err := Write(db, 7, emitAll(nil), nil); err != nil {
		t.Fatal(err)
	}
	if pos, got := load(t, db); pos != 7 || len(got) != 0 {
		t.Fatalf("pos %d, %d records", pos, len(got))
	}
}

func TestWriteReplacesOldSnapshot(t *testing.T) {
	db := openDB(t)
	if err := Write(db, 1, emitAll(records(5000, "old")), nil); err != nil {
		t.Fatal(err)
	}
	want := records(10, "new")
	if err := Write(db, 2, emitAll(want), nil); err != nil {
		t.Fatal(err)
	}
	pos, got := load(t, db)
	if pos != 2 {
		t.Fatalf("pos %d", pos)
	}
	check(t, got, want)
}

func TestFailedWriteKeepsOldSnapshot(t *testing.T) {
	boom := errors.New("boom")
	old := records(3000, "old")
	cases := map[string]struct {
		each func(func(wal.Record) error) error
		also func(*bolt.Tx) error
	}{
		"alsoInTx fails": {emitAll(records(100, "new")), func(*bolt.Tx) error { return boom }},
		"each fails": {func(emit func(wal.Record) error) error {
			if err := emitAll(records(5000, "new"))(emit); err != nil {
				return err
			}
			return boom
		}, nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			db := openDB(t)
			if err := Write(db, 5, emitAll(old), nil); err != nil {
				t.Fatal(err)
			}
			if err := Write(db, 9, tc.each, tc.also); !errors.Is(err, boom) {
				t.Fatalf("Write = %v, want boom", err)
			}
			pos, got := load(t, db)
			if pos != 5 {
				t.Fatalf("pos %d, want 5", pos)
			}
			check(t, got, old)
		})
	}
}

func TestEmitRejectsOversizedRecord(t *testing.T) {
	db := openDB(t)
	err := Write(db, 1, emitAll([]wal.Record{{Key: strings.Repeat("k", wal.MaxFieldLen+1)}}), nil)
	if !errors.Is(err, wal.ErrTooLarge) {
		t.Fatalf("Write = %v", err)
	}
}

// With a wal.Log: Write truncates the log in the same transaction.
func TestWriteWithLogTruncation(t *testing.T) {
	l, err := wal.Open(filepath.Join(t.TempDir(), "l.db"), wal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := range 4 {
		w := make(chanWaiter, 1)
		l.Append([]wal.Record{{Name: "n", Shard: uint32(i)}}, w)
		if err := <-w; err != nil {
			t.Fatal(err)
		}
	}
	pos := l.Position()
	state := []wal.Record{{Name: "n", Shard: 9, Value: 3}}
	if err := Write(l.DB(), pos-1, emitAll(state), func(tx *bolt.Tx) error { return l.TruncateTx(tx, pos-1) }); err != nil {
		t.Fatal(err)
	}
	p, got := load(t, l.DB())
	check(t, got, state)
	var tail []wal.Record
	if err := l.Replay(p, func(r wal.Record) error { tail = append(tail, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(tail) != 1 || tail[0].Shard != 3 {
		t.Fatalf("log after snapshot: %+v", tail)
	}
	if err := l.Replay(0, func(wal.Record) error { return nil }); err != nil {
		t.Fatal(err)
	}
}

func TestLoadRejectsCorruption(t *testing.T) {
	mutate := map[string]func(root *bolt.Bucket) error{
		"head missing":   func(root *bolt.Bucket) error { return root.Delete(headKey) },
		"head flipped":   func(root *bolt.Bucket) error { h := clone(root.Get(headKey)); h[10] ^= 1; return root.Put(headKey, h) },
		"head truncated": func(root *bolt.Bucket) error { return root.Put(headKey, clone(root.Get(headKey))[:20]) },
		"chunk flipped": func(root *bolt.Bucket) error {
			c := root.Bucket(chunksBucket)
			v := clone(c.Get(key(1)))
			v[len(v)/2] ^= 0x10
			return c.Put(key(1), v)
		},
		"chunk torn": func(root *bolt.Bucket) error {
			c := root.Bucket(chunksBucket)
			return c.Put(key(1), clone(c.Get(key(1)))[:100])
		},
		"chunk missing":   func(root *bolt.Bucket) error { return root.Bucket(chunksBucket).Delete(key(1)) },
		"last chunk gone": func(root *bolt.Bucket) error { return root.Bucket(chunksBucket).Delete(key(lastChunk(root))) },
		"extra chunk": func(root *bolt.Bucket) error {
			return root.Bucket(chunksBucket).Put(key(lastChunk(root)+1), wal.EncodeBatch(nil, nil))
		},
		"chunks missing": func(root *bolt.Bucket) error { return root.DeleteBucket(chunksBucket) },
		"another snapshot's chunk": func(root *bolt.Bucket) error { // as a lost page write leaves it
			c := root.Bucket(chunksBucket)
			v := clone(c.Get(key(1)))
			if err := c.Delete(key(1)); err != nil {
				return err
			}
			return c.Put(chunkKey(1, 2), v)
		},
		"a version 1 chunk key": func(root *bolt.Bucket) error {
			c := root.Bucket(chunksBucket)
			v := clone(c.Get(key(1)))
			if err := c.Delete(key(1)); err != nil {
				return err
			}
			return c.Put(binary.BigEndian.AppendUint64(nil, 1), v)
		},
		"foreign chunk key": func(root *bolt.Bucket) error {
			return root.Bucket(chunksBucket).Put([]byte("x"), wal.EncodeBatch(nil, nil))
		},
	}
	for name, m := range mutate {
		t.Run(name, func(t *testing.T) {
			db := openDB(t)
			if err := Write(db, 3, emitAll(records(5000, "r")), nil); err != nil {
				t.Fatal(err)
			}
			if err := db.Update(func(tx *bolt.Tx) error { return m(tx.Bucket(rootBucket)) }); err != nil {
				t.Fatal(err)
			}
			_, err := Load(db, func(wal.Record) error { return nil })
			if !errors.Is(err, ErrCorrupt) || !errors.Is(err, wal.ErrCorrupt) {
				t.Fatalf("Load = %v, want ErrCorrupt", err)
			}
		})
	}
}

func TestLoadNewerVersion(t *testing.T) {
	db := openDB(t)
	if err := Write(db, 3, emitAll(records(3, "r")), nil); err != nil {
		t.Fatal(err)
	}
	err := db.Update(func(tx *bolt.Tx) error {
		root := tx.Bucket(rootBucket)
		h := clone(root.Get(headKey))
		binary.BigEndian.PutUint32(h, Version+1)
		binary.BigEndian.PutUint32(h[headSize-4:], crc32.Checksum(h[:headSize-4], castagnoli))
		return root.Put(headKey, h)
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Load(db, func(wal.Record) error { return nil }); !errors.Is(err, wal.ErrVersion) {
		t.Fatalf("Load = %v, want ErrVersion", err)
	}
}

func TestLoadFnError(t *testing.T) {
	db := openDB(t)
	if err := Write(db, 3, emitAll(records(3, "r")), nil); err != nil {
		t.Fatal(err)
	}
	stop := errors.New("stop")
	if _, err := Load(db, func(wal.Record) error { return stop }); err != stop {
		t.Fatalf("Load = %v", err)
	}
}

// A snapshot larger than one staging transaction, written over a staging
// bucket a crash left behind, loads whole, leaves no staging behind, and
// replaces the previous snapshot.
func TestStagedWriteOverCrashLeftovers(t *testing.T) {
	db := openDB(t)
	if err := Write(db, 1, emitAll(records(10, "old")), nil); err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { // a crashed Write's staging
		b, err := tx.CreateBucket(stagingBucket)
		if err != nil {
			return err
		}
		return b.Put([]byte("junk"), []byte("x"))
	}); err != nil {
		t.Fatal(err)
	}
	recs := records(120_000, "n") // ~3.5 MiB: several staging transactions
	if err := Write(db, 7, emitAll(recs), nil); err != nil {
		t.Fatal(err)
	}
	var got []wal.Record
	pos, err := Load(db, func(r wal.Record) error { got = append(got, r); return nil })
	if err != nil || pos != 7 || len(got) != len(recs) {
		t.Fatalf("Load: pos %d, %d records, %v; want 7, %d", pos, len(got), err, len(recs))
	}
	for i := range recs {
		if got[i] != recs[i] {
			t.Fatalf("record %d = %+v, want %+v", i, got[i], recs[i])
		}
	}
	db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(stagingBucket) != nil {
			t.Fatal("staging bucket left behind")
		}
		return nil
	})
}

// A version 1 snapshot, whose chunk keys carry no position, still loads,
// and the next Write replaces it with the current version.
func TestLoadVersion1(t *testing.T) {
	db := openDB(t)
	recs := records(5000, "v1")
	writeV1(t, db, 5, recs, 1000)
	pos, got := load(t, db)
	if pos != 5 {
		t.Fatalf("pos %d, want 5", pos)
	}
	check(t, got, recs)

	newer := records(10, "v2")
	if err := Write(db, 6, emitAll(newer), nil); err != nil {
		t.Fatal(err)
	}
	pos, got = load(t, db)
	if pos != 6 {
		t.Fatalf("pos %d, want 6", pos)
	}
	check(t, got, newer)
	head, chunks := entries(t, db)
	if h, err := decodeHead(head); err != nil || h.version != Version || len(chunks) != 1 || len(chunks[0].Key) != 16 {
		t.Fatalf("after Write: head %+v (%v), %d chunks, key %x; want version %d, one chunk, a 16-byte key", h, err, len(chunks), chunks[0].Key, Version)
	}

	writeV1(t, db, 5, recs, 1000)
	if err := db.Update(func(tx *bolt.Tx) error { // a current key in a version 1 snapshot
		return tx.Bucket(rootBucket).Bucket(chunksBucket).Put(chunkKey(1, 5), clone(tx.Bucket(rootBucket).Bucket(chunksBucket).Get(binary.BigEndian.AppendUint64(nil, 1))))
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(db, func(wal.Record) error { return nil }); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Load of a version 1 snapshot with a version 2 key = %v, want ErrCorrupt", err)
	}
}
