package wal

import (
	"runtime"
	"sync"
	"testing"
)

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
	var wg sync.WaitGroup
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := make(chanWaiter, 1)
			for i := range rounds {
				l.Append([]Record{{Name: "p", Key: "k", Shard: uint32(p), Value: float64(i)}}, w)
				if err := <-w; err != nil {
					t.Errorf("Committed: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
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
