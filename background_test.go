package ratelimit

// Background work: sweeps of refilled buckets and the snapshot triggers.

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// The periodic sweep works in bounded steps; repeated, it reclaims every
// full bucket (each step starts at a random place in the map).
func TestGentleSweepReclaims(t *testing.T) {
	clk := newClock()
	l := open(t, Options{Now: clk.Now, Partitions: 2, Limits: durableLimits})
	ctx := context.Background()
	const n = 3 * sweepSlice
	rs := make([]Request, n)
	for i := range rs {
		rs[i] = Request{Name: "tb", Key: "k" + strconv.Itoa(i)}
	}
	l.LimitMany(ctx, rs, nil)
	limit(t, l, Request{Name: "tb", Key: "busy", Count: 10})
	clk.Advance(59 * time.Second) // "busy" still short by one token; the rest full
	for round := 0; l.Stats().LiveBuckets > 1; round++ {
		if round == 20 {
			t.Fatalf("%d live buckets after 20 gentle sweeps", l.Stats().LiveBuckets)
		}
		l.sweepGently()
	}
	if v := value(t, l, "tb", "busy").Value; v >= 10 {
		t.Fatalf("a bucket that is not full was dropped (value %v)", v)
	}
}

// A log tail recovered at Open counts toward the snapshot triggers: a
// process that restarts and then writes nothing still snapshots it on the
// interval, and a tail over SnapshotBytes is due at once.
func TestRecoveredTailCountsTowardSnapshot(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rl.db")
	clk := newClock()
	l := open(t, Options{Path: path, Limits: durableLimits, Now: clk.Now})
	for i := range 5 {
		limit(t, l, Request{Name: "tb", Key: strconv.Itoa(i), Count: 1})
	}
	written := l.wal.Written()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	l = open(t, Options{Path: path, Limits: durableLimits, Now: clk.Now})
	if got := l.wal.Replayed(); got != written {
		t.Fatalf("replayed %d bytes of log, the last process wrote %d", got, written)
	}
	later := time.Now().Add(time.Hour)
	if !l.snapshotDue(later, -1, time.Minute) {
		t.Fatal("interval trigger: a recovered tail no snapshot covers is not due")
	}
	if !l.snapshotDue(time.Now(), written, -1) {
		t.Fatalf("bytes trigger at %d: a recovered tail of %d bytes is not due", written, written)
	}
	if l.snapshotDue(time.Now(), written+1, -1) {
		t.Fatalf("bytes trigger at %d: due with only %d bytes uncovered", written+1, written)
	}
	if err := l.Snapshot(); err != nil {
		t.Fatal(err)
	}
	if l.snapshotDue(later, 1, time.Minute) {
		t.Fatal("due again right after a snapshot with nothing new logged")
	}
	limit(t, l, Request{Name: "tb", Key: "x", Count: 1})
	if !l.snapshotDue(later, -1, time.Minute) {
		t.Fatal("interval trigger: a new record after the snapshot is not due")
	}
}
