package ratelimit

// Stats and the figures of Status.

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// Status carries Remaining, RetryAfter and ResetAfter for grants, denials,
// reservations and LimitAll; Stats counts decisions, live buckets,
// snapshots and the log's commits.
func TestStatsAndStatusFigures(t *testing.T) {
	clk := newClock()
	ctx := context.Background()
	l := open(t, Options{Path: filepath.Join(t.TempDir(), "rl.db"), Limits: durableLimits, Now: clk.Now})
	s := limit(t, l, Request{Name: "tb", Key: "u", Count: 4})
	if !s.OK || s.Remaining != 6 || s.ResetAfter != 24*time.Second {
		t.Fatalf("grant status %+v, want remaining 6, reset 24s", s)
	}
	s = limit(t, l, Request{Name: "tb", Key: "u", Count: 7})
	if s.OK || s.Remaining != 6 || s.RetryAfter != 6*time.Second {
		t.Fatalf("denial status %+v", s)
	}
	s = limit(t, l, Request{Name: "tb", Key: "u", Count: 8, Reserve: true})
	if !s.OK || s.Remaining != -2 || s.RetryAfter != 12*time.Second || s.ResetAfter != 72*time.Second {
		t.Fatalf("reservation status %+v", s)
	}
	all, err := l.LimitAll(ctx, Request{Name: "tb", Key: "v", Count: 1}, Request{Name: "fw", Key: "v", Count: 9})
	if err != nil || !all.OK || all.Remaining != 1 || all.Limit != "tb" && all.Remaining != 1 {
		t.Fatalf("LimitAll status %+v %v", all, err)
	}
	if err := l.Snapshot(); err != nil {
		t.Fatal(err)
	}
	st := l.Stats()
	if st.Grants != 3 || st.Denials != 1 || st.Reservations != 1 || st.LiveBuckets != 3 || st.Snapshots != 1 {
		t.Fatalf("stats %+v", st)
	}
	if st.WALCommits == 0 || st.WALRecords < 4 || st.WALBatchRecords.Count() != st.WALCommits || st.WALCommitNanos.Quantile(0.5) == 0 ||
		st.WALCommitTime <= 0 || st.WALCommitTime >= time.Duration(st.WALCommitNanos.Quantile(1))*time.Duration(st.WALCommits) {
		t.Fatalf("wal stats %+v", st)
	}
}

// Stats after Close reports the counts as the limiter closed: counters
// that went back to zero would read as a restart to a metrics system.
func TestStatsAfterClose(t *testing.T) {
	clk := newClock()
	l := open(t, Options{Limits: durableLimits, Now: clk.Now})
	for range 3 {
		limit(t, l, Request{Name: "tb", Key: "u", Count: 4})
	}
	before := l.Stats()
	if before.Grants != 2 || before.Denials != 1 || before.LiveBuckets != 1 {
		t.Fatalf("stats before Close %+v, want 2 grants, 1 denial, 1 bucket", before)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	after := l.Stats()
	before.SnapshotAge, after.SnapshotAge = 0, 0 // read from the real clock
	if after != before {
		t.Errorf("stats after Close %+v, want %+v", after, before)
	}
}
