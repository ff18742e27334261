package wal

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// TestMain has preallocation see a roomy file system, so that the tests
// that expect zeros past the log do not depend on the machine's free
// space (TestStatfsFree reads the real one; TestPreallocatorKeepsAMargin
// fakes a full one).
func TestMain(m *testing.M) {
	freeSpace = func(string) (uint64, uint64, error) { return 1 << 50, 1 << 51, nil }
	os.Exit(m.Run())
}

// chanWaiter delivers Committed's error on a channel (buffer it by 1).
type chanWaiter chan error

func (c chanWaiter) Committed(err error) { c <- err }

// syncWaiter records the outcome; for calls made before Append returns.
type syncWaiter struct {
	called bool
	err    error
}

func (w *syncWaiter) Committed(err error) { w.called, w.err = true, err }

func tempPath(t *testing.T) string {
	return filepath.Join(t.TempDir(), "sub", "dir", "wal.db")
}

func mustOpen(t *testing.T, path string, opts Options) *Log {
	t.Helper()
	l, err := Open(path, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// produce runs producers goroutines, each appending a record of its own
// in rounds with add (producer p, round i) and waiting for its commit
// before the next, and returns when they are done.
func produce(t *testing.T, producers, rounds int, add func(p, i int, recs []Record, w Waiter)) {
	t.Helper()
	var wg sync.WaitGroup
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := make(chanWaiter, 1)
			for i := range rounds {
				add(p, i, []Record{{Name: "p", Key: "k", Shard: uint32(p), Value: float64(i)}}, w)
				if err := <-w; err != nil {
					t.Errorf("producer %d round %d: Committed: %v", p, i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// appendWait appends recs and waits for the commit.
func appendWait(t *testing.T, l *Log, recs ...Record) {
	t.Helper()
	w := make(chanWaiter, 1)
	l.Append(recs, w)
	if err := <-w; err != nil {
		t.Fatalf("Committed: %v", err)
	}
}

func replayAll(t *testing.T, l *Log, after uint64) []Record {
	t.Helper()
	var got []Record
	if err := l.Replay(after, func(r Record) error { got = append(got, r); return nil }); err != nil {
		t.Fatalf("Replay: %v", err)
	}
	return got
}

// metaVersion reads the format version stored in l's file.
func metaVersion(t *testing.T, l *Log) uint32 {
	t.Helper()
	var v uint32
	if err := l.DB().View(func(tx *bolt.Tx) error {
		v = binary.BigEndian.Uint32(tx.Bucket(metaBucket).Get(versionKey))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return v
}

// flatten joins batches into one slice of records, in order.
func flatten(batches [][]Record) []Record {
	var flat []Record
	for _, b := range batches {
		flat = append(flat, b...)
	}
	return flat
}

// checkRecords fails t unless got and want hold the same records in order.
func checkRecords(t *testing.T, what string, got, want []Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d records, want %d", what, len(got), len(want))
	}
	for i := range want {
		if !sameRecord(got[i], want[i]) {
			t.Fatalf("%s: record %d is %+v, want %+v", what, i, got[i], want[i])
		}
	}
}

// bigBatch returns n records whose encoding is well above chunkOver pages
// for n >= 1000 (each record is ~30 bytes).
func bigBatch(tag string, n int) []Record {
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = Record{Name: tag, Key: fmt.Sprintf("k%06d", i), Value: float64(i), TS: int64(i)}
	}
	return recs
}

// chunkedBatches appends n distinct batches, every one of them chunked, and
// returns them in sequence order (batch i+1 is batches[i]).
func chunkedBatches(t *testing.T, l *Log, n int) [][]Record {
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

// logKeys lists the log bucket's keys.
func logKeys(t *testing.T, l *Log) [][]byte {
	t.Helper()
	var keys [][]byte
	if err := l.DB().View(func(tx *bolt.Tx) error { keys = txLogKeys(t, tx); return nil }); err != nil {
		t.Fatal(err)
	}
	return keys
}

// chunkKey is the log key of chunk i of batch seq.
func chunkKey(seq uint64, i uint32) []byte {
	k := binary.BigEndian.AppendUint64(nil, seq)
	if i == 0 {
		return k
	}
	return binary.BigEndian.AppendUint32(k, i)
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

// boltFile creates a plain bbolt file and lets fn fill it.
func boltFile(t *testing.T, fn func(tx *bolt.Tx) error) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "foreign.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(fn); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// gate makes BeforeCommit stop at chosen sequence numbers until released.
type gate struct {
	mu      sync.Mutex
	entered map[uint64]chan struct{}
	release map[uint64]chan error
}

func newGate(seqs ...uint64) *gate {
	g := &gate{entered: map[uint64]chan struct{}{}, release: map[uint64]chan error{}}
	for _, s := range seqs {
		g.entered[s] = make(chan struct{})
		g.release[s] = make(chan error)
	}
	return g
}

func (g *gate) hook(seq uint64) error {
	g.mu.Lock()
	entered, release := g.entered[seq], g.release[seq]
	g.mu.Unlock()
	if entered == nil {
		return nil
	}
	close(entered)
	return <-release
}

// extents returns the end of the pages bbolt uses and the file's size.
func (p *preallocator) extents() (used, size int64, err error) {
	if err := p.db.View(func(tx *bolt.Tx) error { used = tx.Size(); return nil }); err != nil {
		return 0, 0, err
	}
	st, err := os.Stat(p.path)
	if err != nil {
		return 0, 0, err
	}
	return used, st.Size(), nil
}

// truncateAndCheck truncates l up to upTo and checks that exactly the keys
// of all (the log's keys before) after upTo remain, and that a replay
// gives the batches after upTo (batches[i] is batch i+1).
func truncateAndCheck(t *testing.T, l *Log, upTo uint64, all [][]byte, batches [][]Record) {
	t.Helper()
	if err := l.DB().Update(func(tx *bolt.Tx) error { return l.TruncateTx(tx, upTo) }); err != nil {
		t.Fatal(err)
	}
	if got, want := logKeys(t, l), keysAfter(all, upTo); !slices.EqualFunc(got, want, bytes.Equal) {
		t.Fatalf("after TruncateTx(%d): %d keys, want %d", upTo, len(got), len(want))
	}
	checkRecords(t, fmt.Sprintf("Replay(0) after TruncateTx(%d)", upTo), replayAll(t, l, 0), flatten(batches[upTo:]))
}

// keysAfter is the log keys of all whose batch comes after upTo.
func keysAfter(all [][]byte, upTo uint64) [][]byte {
	var want [][]byte
	for _, k := range all {
		if seq, _, _ := parseLogKey(k); seq > upTo {
			want = append(want, k)
		}
	}
	return want
}

// txLogKeys is every key of the log bucket as tx sees it, copied.
func txLogKeys(t *testing.T, tx *bolt.Tx) [][]byte {
	t.Helper()
	var keys [][]byte
	if err := tx.Bucket(logBucket).ForEach(func(k, _ []byte) error {
		keys = append(keys, bytes.Clone(k))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return keys
}
