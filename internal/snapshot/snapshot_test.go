package snapshot

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"path/filepath"
	"strings"
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

type chanWaiter chan error

func (c chanWaiter) Committed(err error) { c <- err }

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

func clone(b []byte) []byte { return append([]byte(nil), b...) }

func key(i uint64) []byte { return binary.BigEndian.AppendUint64(nil, i) }

func lastChunk(root *bolt.Bucket) uint64 {
	k, _ := root.Bucket(chunksBucket).Cursor().Last()
	return binary.BigEndian.Uint64(k)
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
