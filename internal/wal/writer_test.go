package wal

// The writer (writer.go): group commit, sticky failures, Close, barriers,
// gathering a cohort.

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
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

// Producers that append again as soon as their commit is acknowledged
// share one commit per round: the writer lets the producers it has just
// released append before it commits again (Log.settle). Without that, it
// commits the first one to come back alone and the others a commit later,
// so commits alternate between one record and the rest (92-126 commits for
// 50 rounds, measured with settling turned off, against 50-52 with it).
// One processor makes the schedule a queue of the runnable goroutines.
func TestReleasedProducersShareTheNextCommit(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	const producers, rounds = 8, 50
	l := mustOpen(t, tempPath(t), Options{})
	produce(t, producers, rounds, func(_, _ int, recs []Record, w Waiter) { l.Append(recs, w) })
	st := l.Stats()
	if st.Records != producers*rounds {
		t.Fatalf("%d records committed, want %d", st.Records, producers*rounds)
	}
	t.Logf("%d commits", st.Commits)
	// The race detector shuffles the run queue a little.
	if limit := uint64(rounds * 5 / 4); st.Commits > limit {
		t.Errorf("%d commits for %d rounds of %d producers, want at most %d (one per round, give or take)",
			st.Commits, rounds, producers, limit)
	}
}

// A lone caller's AppendOwn leaves an idle writer asleep, and the
// CommitNow that follows commits on the caller's goroutine: the waiter has
// been called when it returns. A round counts only if the writer was
// asleep with no signal pending before it; with a wake-up per append the
// writer would be awake (or signalled) after every such append.
func TestAppendOwnCommitsOnTheCallersGoroutine(t *testing.T) {
	const rounds = 200
	l := mustOpen(t, tempPath(t), Options{Preallocate: -1}) // nothing else wakes the writer
	asleep := func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.idleWriter && len(l.wake) == 0
	}
	counted := 0
	for i := range rounds {
		idle := asleep()
		w := make(chanWaiter, 1)
		l.AppendOwn([]Record{{Name: "n", Key: "k", Value: float64(i)}}, w)
		if idle && !asleep() {
			t.Fatalf("round %d: AppendOwn woke the writer", i)
		}
		l.CommitNow()
		select {
		case err := <-w:
			if err != nil {
				t.Fatalf("round %d: Committed: %v", i, err)
			}
		default:
			if idle {
				t.Fatalf("round %d: not committed when CommitNow returned, though the writer was asleep", i)
			}
			if err := <-w; err != nil {
				t.Fatalf("round %d: Committed: %v", i, err)
			}
		}
		if idle {
			counted++
		}
	}
	t.Logf("%d of %d rounds began with the writer asleep", counted, rounds)
	if counted == 0 {
		t.Fatalf("the writer was never asleep before a round, in %d rounds", rounds)
	}
	if st := l.Stats(); st.Records != rounds {
		t.Fatalf("%d records committed, want %d", st.Records, rounds)
	}
}

// AppendOwn strands nothing when others append and commit at the same
// time: every waiter hears its commit, whether its batch was committed by
// its own CommitNow, another caller's or the writer.
func TestAppendOwnAmongOthers(t *testing.T) {
	const producers, rounds = 8, 200
	l := mustOpen(t, tempPath(t), Options{})
	produce(t, producers, rounds, func(p, i int, recs []Record, w Waiter) {
		if (p+i)%3 == 0 {
			l.Append(recs, w)
			return
		}
		l.AppendOwn(recs, w)
		l.CommitNow()
	})
	if st := l.Stats(); st.Records != producers*rounds {
		t.Fatalf("%d records committed, want %d", st.Records, producers*rounds)
	}
}

// gatherAfter opens a log whose first commit (one record, waiter a) is
// held until n more records are pending, each a lone caller's
// (AppendOwn), so that the writer, once it releases a, expects n+1 lone
// callers pending (Log.cohort) and gathers. With
// long set, the gather's timer is made an hour long before the commit is
// released: only a signal can end that gather in a test's time. With
// stale set, a gather signal is left pending before it, as an Append
// that completed an earlier gather after its timer fired would leave it.
func gatherAfter(t *testing.T, n int, long, stale bool) (l *Log, rest []chanWaiter) {
	g := newGate(1)
	l = mustOpen(t, tempPath(t), Options{BeforeCommit: g.hook, Preallocate: -1})
	a := make(chanWaiter, 1)
	go func() { // a lone caller: it commits its record itself, unless the writer does
		l.AppendOwn([]Record{{Name: "a"}}, a)
		l.CommitNow()
	}()
	<-g.entered[1]
	for i := range n {
		w := make(chanWaiter, 1)
		l.AppendOwn([]Record{{Name: "b", Shard: uint32(i)}}, w)
		rest = append(rest, w)
	}
	if long {
		l.mu.Lock()
		l.typical = time.Hour
		l.mu.Unlock()
	}
	if stale {
		notify(l.gathered)
	}
	g.release[1] <- nil
	if err := <-a; err != nil {
		t.Fatal(err)
	}
	return l, rest
}

// gathering waits until the writer gathers (with no signal pending), or
// has given up and committed what was pending.
func gathering(l *Log) {
	for {
		l.mu.Lock()
		want, pending := l.want, len(l.pending.waiters)
		l.mu.Unlock()
		if (want > 0 && len(l.gathered) == 0) || pending == 0 {
			return
		}
		runtime.Gosched()
	}
}

// committed fails unless every waiter hears a successful commit within
// a generous bound (a gather that only its timer could end would hang).
func committed(t *testing.T, ws ...chanWaiter) {
	t.Helper()
	for i, w := range ws {
		select {
		case err := <-w:
			if err != nil {
				t.Fatalf("waiter %d: %v", i, err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("waiter %d: no commit: the gather was not ended", i)
		}
	}
}

// A cohort that does not all come back is committed all the same, once
// the gather has waited a typical commit's duration, and the writer then
// commits without gathering for a while (gatherSkip commits).
func TestGatherEndsWhenTheCohortStaysAway(t *testing.T) {
	l, rest := gatherAfter(t, 8, false, false) // a's producer never appends again
	committed(t, rest...)
	l.mu.Lock()
	skip := l.skip
	l.mu.Unlock()
	if skip != gatherSkip {
		t.Errorf("skip = %d after a gather that missed, want %d", skip, gatherSkip)
	}
	if st := l.Stats(); st.Commits != 2 || st.Records != 9 {
		t.Errorf("%d commits of %d records, want 2 of 9", st.Commits, st.Records)
	}
}

// A cohort that comes back while the writer gathers it ends the gather
// (the Append that completes it signals): it is committed as one batch,
// and the writer keeps gathering. A signal left over from an earlier
// gather does not end the wait before. One processor keeps the writer
// from being seen between taking that signal and committing.
func TestGatherTakesTheCohortBack(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	for _, stale := range []bool{false, true} {
		l, rest := gatherAfter(t, 8, true, stale)
		gathering(l)
		again := make(chanWaiter, 1)
		l.AppendOwn([]Record{{Name: "a", Value: 1}}, again) // a's producer, back
		committed(t, append(rest, again)...)
		l.mu.Lock()
		skip := l.skip
		l.mu.Unlock()
		if skip != 0 {
			t.Errorf("stale signal %v: skip = %d after a gather that met its cohort, want 0", stale, skip)
		}
		if st := l.Stats(); st.Commits != 2 || st.Records != 10 {
			t.Errorf("stale signal %v: %d commits of %d records, want 2 of 10 (the cohort in one)", stale, st.Commits, st.Records)
		}
	}
}

// Waiters appended with Append (a partition's batch of several callers'
// work) are not a cohort the writer expects back: only lone callers
// (AppendOwn) end a gather, and a released batch of Append's waiters
// sets none off.
func TestGatherCountsLoneCallers(t *testing.T) {
	l, rest := gatherAfter(t, 8, true, false)
	gathering(l)
	batch := make(chanWaiter, 1)
	l.Append([]Record{{Name: "batch"}}, batch)
	l.mu.Lock()
	want := l.want
	l.mu.Unlock()
	if want == 0 {
		t.Fatal("an Append's waiter ended the gather")
	}
	again := make(chanWaiter, 1)
	l.AppendOwn([]Record{{Name: "a", Value: 1}}, again)
	committed(t, append(rest, batch, again)...)
	l.mu.Lock()
	cohort := l.cohort
	l.mu.Unlock()
	if cohort != 9 {
		t.Errorf("cohort %d after releasing 9 lone callers and a batch's waiter, want 9", cohort)
	}
}

// A pending batch that reaches settleBytes ends a gather: it is worth a
// commit of its own already.
func TestGatherEndsAtSettleBytes(t *testing.T) {
	l, rest := gatherAfter(t, 8, true, false)
	gathering(l)
	big := make(chanWaiter, 1)
	l.Append(bigBatch("big", settleBytes/8), big) // each record more than 8 bytes
	committed(t, append(rest, big)...)
}

// Close while the writer gathers ends the gather, commits what is
// pending and returns, though the waiter gathered for never comes back.
func TestCloseWhileGathering(t *testing.T) {
	l, rest := gatherAfter(t, 8, true, false)
	gathering(l)
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		if err := l.Close(); err != nil {
			t.Error(err)
		}
	}()
	committed(t, rest...)
	select {
	case <-closed:
	case <-time.After(20 * time.Second):
		t.Fatal("Close did not return: the gather was not ended")
	}
}

// One stalled commit moves the typical duration a gather waits by an
// eighth of the typical one at most; commits of steady duration keep it.
func TestTypicalCommit(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct{ typical, took, want time.Duration }{
		{0, 3 * ms, 3 * ms}, // the first commit sets it
		{ms, ms, ms},
		{8 * ms, time.Hour, 9 * ms}, // a stall: capped at twice, then an eighth
		{8 * ms, 0, 7 * ms},
		{8 * ms, 12 * ms, 8*ms + ms/2},
	} {
		if got := typicalCommit(tc.typical, tc.took); got != tc.want {
			t.Errorf("typicalCommit(%v, %v) = %v, want %v", tc.typical, tc.took, got, tc.want)
		}
	}
}

// A gather's cohort that came within the typical commit bounding the wait
// is met; one that came later (an open load's arrivals, a timer that
// fired late) is late.
func TestGatherResult(t *testing.T) {
	const typical = 400 * time.Microsecond
	for _, tc := range []struct {
		met  bool
		took time.Duration
		want gatherOutcome
	}{
		{true, 50 * time.Microsecond, gatherMet},
		{true, typical, gatherMet},
		{true, typical + 1, gatherLate},
		{true, 3 * typical, gatherLate},
		{false, 50 * time.Microsecond, gatherMissed},
		{false, 3 * typical, gatherMissed},
	} {
		if got := gatherResult(tc.met, tc.took, typical); got != tc.want {
			t.Errorf("gatherResult(met %v, took %v, typical %v) = %v, want %v", tc.met, tc.took, typical, got, tc.want)
		}
	}
}

// After a gather that missed its cohort, or a second late one in a row,
// the writer skips gatherSkip commits before it gathers again, twice as
// many after every miss that follows, up to gatherSkipMost, and none once
// a gather meets it.
func TestGatherBackoff(t *testing.T) {
	var l Log
	for _, tc := range []struct {
		o    gatherOutcome
		skip int
	}{
		{gatherMissed, gatherSkip}, {gatherMissed, 2 * gatherSkip}, {gatherMissed, 4 * gatherSkip},
		{gatherMet, 0},
		{gatherMissed, gatherSkip},
		{gatherMet, 0},
		{gatherLate, 0}, // one late gather alone: no skip
		{gatherMet, 0},
		{gatherLate, 0},
		{gatherLate, gatherSkip}, // two in a row: a miss
		{gatherLate, 0},          // the pair is counted: this one starts anew
		{gatherLate, 2 * gatherSkip},
		{gatherMissed, 4 * gatherSkip},
	} {
		l.skip = 0
		l.afterGather(tc.o)
		if l.skip != tc.skip {
			t.Fatalf("after a gather of outcome %d: skip %d, want %d", tc.o, l.skip, tc.skip)
		}
	}
	for range 20 {
		l.afterGather(gatherMissed)
	}
	if l.skip != gatherSkipMost {
		t.Errorf("after many misses: skip %d, want %d", l.skip, gatherSkipMost)
	}
}
