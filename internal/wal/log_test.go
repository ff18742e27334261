package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"

	bolt "go.etcd.io/bbolt"
)

func TestGroupCommitConcurrent(t *testing.T) {
	const producers, perProducer = 64, 100
	path := tempPath(t)
	l := mustOpen(t, path, Options{})
	var wg sync.WaitGroup
	errs := make(chan error, producers)
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := make(chanWaiter, 1)
			recs := make([]Record, 2)
			for i := range perProducer {
				// Two records per Append; recs is reused at once.
				recs[0] = Record{Name: "p", Key: fmt.Sprint(p), Shard: uint32(p), Value: float64(2 * i), TS: int64(i)}
				recs[1] = recs[0]
				recs[1].Value++
				l.Append(recs, w)
				recs[0], recs[1] = Record{}, Record{}
				if err := <-w; err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Committed: %v", err)
	}
	st := l.Stats()
	if st.Records != producers*perProducer*2 || st.Commits == 0 || st.Commits > producers*perProducer {
		t.Fatalf("stats: %+v", st)
	}
	if l.Position() != st.Commits || st.BatchRecords.Count() != st.Commits || st.CommitNanos.Count() != st.Commits {
		t.Fatalf("position %d, stats %+v", l.Position(), st)
	}
	if l.Written() != int64(st.Bytes) {
		t.Fatalf("Written %d, stats bytes %d", l.Written(), st.Bytes)
	}
	checkCommitTime(t, st)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	l = mustOpen(t, path, Options{})
	next := make([]float64, producers)
	for _, r := range replayAll(t, l, 0) {
		if r.Value != next[r.Shard] || r.Key != fmt.Sprint(r.Shard) {
			t.Fatalf("producer %d: got value %v, want %v", r.Shard, r.Value, next[r.Shard])
		}
		next[r.Shard]++
	}
	for p, n := range next {
		if n != 2*perProducer {
			t.Fatalf("producer %d: replayed %v records", p, n)
		}
	}
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

func TestCommitFailureIsSticky(t *testing.T) {
	injected := errors.New("injected I/O error")
	g := newGate(1, 2)
	path := tempPath(t)
	l := mustOpen(t, path, Options{BeforeCommit: g.hook})

	a := make(chanWaiter, 1)
	l.Append([]Record{{Name: "a"}}, a)
	<-g.entered[1] // the writer is committing batch 1
	var batch2 []chanWaiter
	for i := range 10 {
		w := make(chanWaiter, 1)
		l.Append([]Record{{Name: "b", Shard: uint32(i)}}, w)
		batch2 = append(batch2, w)
	}
	g.release[1] <- nil
	if err := <-a; err != nil {
		t.Fatalf("batch 1: %v", err)
	}
	<-g.entered[2] // the writer is committing batch 2 (all b's)
	var batch3 []chanWaiter
	for range 5 {
		w := make(chanWaiter, 1)
		l.Append([]Record{{Name: "c"}}, w)
		batch3 = append(batch3, w)
	}
	g.release[2] <- injected
	for i, w := range append(batch2, batch3...) {
		if err := <-w; !errors.Is(err, ErrFailed) || (i < len(batch2) && !errors.Is(err, injected)) {
			t.Fatalf("waiter %d: err = %v", i, err)
		}
	}
	if err := l.Err(); !errors.Is(err, ErrFailed) || !errors.Is(err, injected) {
		t.Fatalf("Err() = %v", err)
	}
	var late syncWaiter
	l.Append([]Record{{Name: "late"}}, &late)
	if !late.called || !errors.Is(late.err, ErrFailed) {
		t.Fatalf("Append after failure: called %v, err %v", late.called, late.err)
	}
	if st := l.Stats(); st.FailedCommits != 1 || st.Commits != 1 || l.Position() != 1 {
		t.Fatalf("position %d, stats %+v", l.Position(), st)
	}
	if err := l.Close(); !errors.Is(err, ErrFailed) {
		t.Fatalf("Close = %v, want the sticky error", err)
	}

	l = mustOpen(t, path, Options{})
	if got := replayAll(t, l, 0); len(got) != 1 || got[0].Name != "a" {
		t.Fatalf("replayed %+v", got)
	}
}

func TestCloseFlushesPending(t *testing.T) {
	g := newGate(1)
	path := tempPath(t)
	l, err := Open(path, Options{BeforeCommit: g.hook})
	if err != nil {
		t.Fatal(err)
	}
	first := make(chanWaiter, 1)
	l.Append([]Record{{Name: "first"}}, first)
	<-g.entered[1]
	const n = 100
	ws := make(chanWaiter, n)
	for i := range n {
		l.Append([]Record{{Name: "pending", Shard: uint32(i)}}, ws)
	}
	go func() { g.release[1] <- nil }()
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for range n {
		if err := <-ws; err != nil { // all released before Close returned
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close = %v, want nil", err)
	}
	var after syncWaiter
	l.Append([]Record{{Name: "after"}}, &after)
	if !after.called || !errors.Is(after.err, ErrClosed) {
		t.Fatalf("Append after Close: called %v, err %v", after.called, after.err)
	}

	l = mustOpen(t, path, Options{})
	if got := replayAll(t, l, 0); len(got) != n+1 {
		t.Fatalf("replayed %d records, want %d", len(got), n+1)
	}
}

func TestReopenReplayAndPosition(t *testing.T) {
	path := tempPath(t)
	l := mustOpen(t, path, Options{})
	if l.Position() != 0 {
		t.Fatalf("fresh position %d", l.Position())
	}
	for i := range 5 {
		appendWait(t, l, Record{Name: "r", Shard: uint32(i)}, Record{Name: "r2", Shard: uint32(i)})
	}
	if l.Position() != 5 {
		t.Fatalf("position %d, want 5", l.Position())
	}
	l.Close()

	l = mustOpen(t, path, Options{})
	if l.Position() != 5 || l.Written() != 0 {
		t.Fatalf("reopened: position %d, written %d", l.Position(), l.Written())
	}
	got := replayAll(t, l, 3)
	if len(got) != 4 || got[0].Shard != 3 || got[1].Name != "r2" || got[3].Shard != 4 {
		t.Fatalf("Replay(3) = %+v", got)
	}
	if len(replayAll(t, l, 5)) != 0 || len(replayAll(t, l, 99)) != 0 || len(replayAll(t, l, math.MaxUint64)) != 0 {
		t.Fatal("Replay past the end returned records")
	}
	appendWait(t, l, Record{Name: "six"})
	if l.Position() != 6 {
		t.Fatalf("position %d, want 6", l.Position())
	}
	stop := errors.New("stop")
	if err := l.Replay(0, func(Record) error { return stop }); err != stop {
		t.Fatalf("Replay with failing fn = %v", err)
	}
}

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

func TestEmptyAppendIsBarrier(t *testing.T) {
	l := mustOpen(t, tempPath(t), Options{})
	w := make(chanWaiter, 1)
	l.Append(nil, w)
	if err := <-w; err != nil {
		t.Fatal(err)
	}
	if l.Position() != 0 || l.Stats().Commits != 0 {
		t.Fatal("an empty Append committed a batch")
	}
	// Behind pending records it waits for their commit.
	g := newGate(1)
	l2 := mustOpen(t, tempPath(t), Options{BeforeCommit: g.hook})
	a, b := make(chanWaiter, 1), make(chanWaiter, 1)
	l2.Append([]Record{{Name: "a"}}, a)
	<-g.entered[1]
	l2.Append([]Record{{Name: "b"}}, b)
	barrier := make(chanWaiter, 1)
	l2.Append(nil, barrier)
	g.release[1] <- nil
	for _, c := range []chanWaiter{a, b, barrier} {
		if err := <-c; err != nil {
			t.Fatal(err)
		}
	}
	if l2.Position() != 2 {
		t.Fatalf("position %d, want 2", l2.Position())
	}
}

func TestAppendTooLarge(t *testing.T) {
	l := mustOpen(t, tempPath(t), Options{})
	var w syncWaiter
	l.Append([]Record{{Name: "ok"}, {Key: strings.Repeat("k", MaxFieldLen+1)}}, &w)
	if !w.called || !errors.Is(w.err, ErrTooLarge) {
		t.Fatalf("called %v, err %v", w.called, w.err)
	}
	if l.Err() != nil {
		t.Fatal("a refused Append made the log fail")
	}
	appendWait(t, l, Record{Name: "after"})
	if got := replayAll(t, l, 0); len(got) != 1 || got[0].Name != "after" {
		t.Fatalf("replayed %+v", got)
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

// checkCommitTime checks that st.CommitTime, the sum of the latencies
// st.CommitNanos counts, lies within the bounds that histogram puts on it:
// each value in bucket i >= 1 is in [2^(i-1), 2^i) ns.
func checkCommitTime(t *testing.T, st Stats) {
	t.Helper()
	var lo, hi float64
	for i, n := range st.CommitNanos {
		if i > 0 {
			lo += float64(n) * math.Ldexp(1, i-1)
			hi += float64(n) * math.Ldexp(1, i)
		}
	}
	if ns := float64(st.CommitTime); st.Commits == 0 || ns < lo || ns >= hi {
		t.Fatalf("CommitTime %v over %d commits, want within [%v, %v) ns from the histogram", st.CommitTime, st.Commits, lo, hi)
	}
}
