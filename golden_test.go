package ratelimit

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/seed7fbd42b6/ratelimit/internal/snapshot"
	"github.com/seed7fbd42b6/ratelimit/internal/wal"
	"github.com/seed7fbd42b6/ratelimit/ratelimittest"
)

// testdata/v<N>.db is a file whose snapshot has format version N
// (snapshot.Version): grants, a reservation, a sharded grant and a credit,
// then a snapshot, then more grants and a reset in the log after it. Every
// later version must open each and find the same state. Regenerate (only
// the current version's file, when the format version changes) with:
// RATELIMIT_GOLDEN=1 go test -run TestGoldenFile .
func TestGoldenFile(t *testing.T) {
	for version := 1; version <= snapshot.Version; version++ {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) { checkGoldenFile(t, version) })
	}
}

func checkGoldenFile(t *testing.T, version int) {
	golden := filepath.Join("testdata", fmt.Sprintf("v%d.db", version))
	opts := func(path string) Options {
		clk := ratelimittest.NewClock(time.Unix(1_700_000_000, 0)) // the file was written then
		return Options{Path: path, Limits: durableLimits, Now: clk.Now}
	}
	ctx := context.Background()
	if os.Getenv("RATELIMIT_GOLDEN") == "1" && version == snapshot.Version {
		os.Remove(golden)
		l := open(t, opts(golden))
		for _, r := range []Request{
			{Name: "tb", Key: "a", Count: 7},
			{Name: "tb", Key: "debt", Count: 25, Reserve: true},
			{Name: "fw", Key: "a", Count: 4},
			{Name: "sh", Count: 15},
			{Name: "tb", Key: "reset", Count: 9},
		} {
			limit(t, l, r)
		}
		if err := l.Credit(ctx, "tb", "debt", 5); err != nil {
			t.Fatal(err)
		}
		if err := l.Snapshot(); err != nil {
			t.Fatal(err)
		}
		limit(t, l, Request{Name: "tb", Key: "a", Count: 1})
		limit(t, l, Request{Name: "fw", Key: "tail", Count: 3})
		if err := l.Reset(ctx, "tb", "reset"); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "v1.db")
	src, err := os.Open(golden)
	if err != nil {
		t.Fatalf("%v (regenerate with RATELIMIT_GOLDEN=1)", err)
	}
	dst, _ := os.Create(path)
	io.Copy(dst, src)
	src.Close()
	dst.Close()

	l, err := Open(opts(path))
	if err != nil {
		t.Fatalf("a file with a version %d snapshot does not open: %v", version, err)
	}
	defer l.Close()
	for _, c := range []struct {
		name, key string
		want      float64
	}{{"tb", "a", 2}, {"tb", "debt", -10}, {"fw", "a", 6}, {"fw", "tail", 7}, {"sh", "", 25}, {"tb", "reset", 10}} {
		if got := value(t, l, c.name, c.key).Value; got != c.want {
			t.Errorf("%s/%q = %v, want %v", c.name, c.key, got, c.want)
		}
	}
	// The file holds both parts of recovery: a snapshot and a log after it.
	n := 0
	pos, err := snapshot.Load(l.wal.DB(), func(wal.Record) error { n++; return nil })
	tail := 0
	l.wal.Replay(pos, func(wal.Record) error { tail++; return nil })
	if err != nil || pos == 0 || n != 6 || tail != 3 {
		t.Errorf("snapshot at %d with %d records (%v), %d records after it; want 6 and 3", pos, n, err, tail)
	}
	if st := l.Stats(); st.LiveBuckets != 4+2 { // tb/a, tb/debt, fw/a, fw/tail, two shards of sh
		t.Errorf("live buckets %d, want 6", st.LiveBuckets)
	}
}
