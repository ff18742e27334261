package ratelimit

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/seed7fbd42b6/ratelimit/ratelimittest"
	bolt "go.etcd.io/bbolt"
)

var durableLimits = map[string]Config{
	"tb":  {Kind: TokenBucket, Rate: 10, Period: time.Minute},
	"fw":  {Kind: FixedWindow, Rate: 10, Period: time.Minute},
	"sh":  {Kind: TokenBucket, Rate: 40, Period: time.Minute, Shards: 4},
	"big": {Kind: TokenBucket, Rate: 1e9, Period: time.Hour},
}

func openDurable(t testing.TB, path string, clk *ratelimittest.Clock, mod func(*Options)) *Limiter {
	t.Helper()
	o := Options{Path: path, Limits: durableLimits, Now: clk.Now, SweepInterval: -1, SnapshotInterval: -1, SnapshotBytes: -1}
	if mod != nil {
		mod(&o)
	}
	l, err := Open(o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return l
}

func mustValue(t testing.TB, l *Limiter, name, key string) float64 {
	t.Helper()
	v, err := l.Value(context.Background(), name, key)
	if err != nil {
		t.Fatalf("Value(%s, %q): %v", name, key, err)
	}
	return v.Value
}

func mustLimit(t testing.TB, l *Limiter, r Request) Status {
	t.Helper()
	s, err := l.Limit(context.Background(), r)
	if err != nil {
		t.Fatalf("Limit(%+v): %v", r, err)
	}
	return s
}

// Reopening restores every bucket, reserved debt included, and every reset,
// with and without a snapshot in between.
func TestReopenRestoresState(t *testing.T) {
	for _, snap := range []bool{false, true} {
		t.Run("snapshot="+strconv.FormatBool(snap), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "sub", "rl.db")
			clk := newFakeClock()
			ctx := context.Background()
			l := openDurable(t, path, clk, nil)
			mustLimit(t, l, Request{Name: "tb", Key: "a", Count: 7})
			mustLimit(t, l, Request{Name: "tb", Key: "debt", Count: 25, Reserve: true})
			mustLimit(t, l, Request{Name: "fw", Key: "a", Count: 4})
			mustLimit(t, l, Request{Name: "sh", Count: 15})
			mustLimit(t, l, Request{Name: "tb", Key: "reset", Count: 9})
			if s, err := l.LimitAll(ctx, Request{Name: "tb", Key: "all"}, Request{Name: "fw", Key: "all", Count: 2}); err != nil || !s.OK {
				t.Fatalf("LimitAll = %+v, %v", s, err)
			}
			if snap {
				if err := l.Snapshot(); err != nil {
					t.Fatal(err)
				}
			}
			if err := l.Reset(ctx, "tb", "reset"); err != nil {
				t.Fatal(err)
			}
			mustLimit(t, l, Request{Name: "tb", Key: "a", Count: 1})
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l = openDurable(t, path, clk, nil)
			defer l.Close()
			for _, c := range []struct {
				name, key string
				want      float64
			}{{"tb", "a", 2}, {"tb", "debt", -15}, {"fw", "a", 6}, {"sh", "", 25}, {"tb", "reset", 10}, {"tb", "all", 9}, {"fw", "all", 8}, {"tb", "fresh", 10}} {
				if got := mustValue(t, l, c.name, c.key); got != c.want {
					t.Errorf("%s/%s after reopen = %v, want %v", c.name, c.key, got, c.want)
				}
			}
		})
	}
}

// A failed commit fails closed: every waiter of the failed batch gets
// ErrUnavailable and OK == false, and every later grant is refused.
func TestCommitFailureFailsClosed(t *testing.T) {
	clk := newFakeClock()
	var mu sync.Mutex
	fail := false
	gate := make(chan struct{})
	l := openDurable(t, filepath.Join(t.TempDir(), "rl.db"), clk, func(o *Options) {
		o.beforeCommit = func(uint64) error {
			mu.Lock()
			defer mu.Unlock()
			if fail {
				<-gate // hold the failing commit until every caller is queued
				return errors.New("injected disk failure")
			}
			return nil
		}
	})
	defer l.Close()
	mustLimit(t, l, Request{Name: "big", Key: "warm"})
	mu.Lock()
	fail = true
	mu.Unlock()

	const callers = 32
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	oks := make(chan bool, callers)
	started := make(chan struct{}, callers)
	for i := 0; i < callers; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			started <- struct{}{}
			s, err := l.Limit(context.Background(), Request{Name: "big", Key: "k" + strconv.Itoa(i)})
			errs <- err
			oks <- s.OK
		}(i)
	}
	for i := 0; i < callers; i++ {
		<-started
	}
	close(gate)
	wg.Wait()
	close(errs)
	close(oks)
	for err := range errs {
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("waiter got %v, want ErrUnavailable", err)
		}
	}
	for ok := range oks {
		if ok {
			t.Fatal("a failed commit acknowledged a grant")
		}
	}
	// Sticky: later grants and resets fail without waiting on the disk.
	if _, err := l.Limit(context.Background(), Request{Name: "big", Key: "later"}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("later grant: %v, want ErrUnavailable", err)
	}
	if err := l.Reset(context.Background(), "big", "warm"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("later reset: %v, want ErrUnavailable", err)
	}
	// A denial never needed the disk, and Check writes nothing: both still answer.
	if s, err := l.Check(context.Background(), Request{Name: "tb", Key: "x"}); err != nil || !s.OK {
		t.Fatalf("Check after failure = %+v, %v", s, err)
	}
}

func TestOpenLockedFileFailsFast(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rl.db")
	clk := newFakeClock()
	l := openDurable(t, path, clk, nil)
	defer l.Close()
	start := time.Now()
	_, err := Open(Options{Path: path, Limits: durableLimits, LockTimeout: 100 * time.Millisecond})
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("second Open: %v, want ErrUnavailable", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("second Open took %v", d)
	}
}

func TestOpenBadFiles(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.db")
	if err := os.WriteFile(garbage, []byte("this is not a bbolt file, not at all"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Options{Path: garbage}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("garbage file: %v", err)
	}
	blocker := filepath.Join(dir, "file")
	os.WriteFile(blocker, nil, 0o600)
	if _, err := Open(Options{Path: filepath.Join(blocker, "sub", "rl.db")}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("uncreatable dir: %v", err)
	}
}

// Memory and snapshots follow active keys: after a wave of one-off keys has
// refilled, the maps and the next snapshot hold almost nothing, and later
// waves do not grow the file.
func TestOneOffKeysDoNotAccumulate(t *testing.T) {
	n := 1_000_000
	if testing.Short() || raceEnabled {
		n = 100_000
	}
	path := filepath.Join(t.TempDir(), "rl.db")
	clk := newFakeClock()
	l := openDurable(t, path, clk, nil)
	defer l.Close()
	ctx := context.Background()
	wave := func(w int) {
		rs := make([]Request, 0, 1024)
		var out []Decision
		for i := 0; i < n; i += cap(rs) {
			rs = rs[:0]
			for j := i; j < i+cap(rs) && j < n; j++ {
				rs = append(rs, Request{Name: "tb", Key: "w" + strconv.Itoa(w) + "-" + strconv.Itoa(j)})
			}
			out = l.LimitMany(ctx, rs, out)
			for _, d := range out {
				if d.Err != nil || !d.OK {
					t.Fatalf("wave %d: %+v", w, d)
				}
			}
		}
	}
	live := func() int {
		total := 0
		for i := 0; i < l.group.Partitions(); i++ {
			l.group.Run(i, func(p *actorPartition) { total += p.Len() })
		}
		return total
	}
	var sizes []int64
	for w := 0; w < 3; w++ {
		wave(w)
		if got := live(); got != n {
			t.Fatalf("wave %d: %d live buckets, want %d", w, got, n)
		}
		clk.Advance(time.Minute) // every bucket refills
		if err := l.Snapshot(); err != nil {
			t.Fatal(err)
		}
		if got := live(); got != 0 {
			t.Fatalf("wave %d: %d live buckets after refill, want 0", w, got)
		}
		// The pages in use (the file itself also holds preallocated
		// zeros ahead of them, a step at a time).
		var used int64
		if err := l.wal.DB().View(func(tx *bolt.Tx) error { used = tx.Size(); return nil }); err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, used)
	}
	// bbolt reuses freed pages, so identical waves reuse the space the
	// first one grew; what they move is its own fragmentation, a little.
	if sizes[2] > sizes[1]+sizes[1]/50 {
		t.Fatalf("the file's used pages grew across identical waves: %v", sizes)
	}
	// The snapshot is empty: reopening restores nothing.
	l.Close()
	l = openDurable(t, path, clk, nil)
	if got := live(); got != 0 {
		t.Fatalf("%d buckets restored, want 0", got)
	}
}

// The periodic sweep works in bounded steps; repeated, it reclaims every
// full bucket (each step starts at a random place in the map).
func TestGentleSweepReclaims(t *testing.T) {
	clk := newFakeClock()
	l, err := Open(Options{Now: clk.Now, Partitions: 2, Limits: durableLimits, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	const n = 3 * sweepSlice
	rs := make([]Request, n)
	for i := range rs {
		rs[i] = Request{Name: "tb", Key: "k" + strconv.Itoa(i)}
	}
	l.LimitMany(ctx, rs, nil)
	mustLimit(t, l, Request{Name: "tb", Key: "busy", Count: 10})
	clk.Advance(59 * time.Second) // "busy" still short by one token; the rest full
	for round := 0; l.Stats().LiveBuckets > 1; round++ {
		if round == 20 {
			t.Fatalf("%d live buckets after 20 gentle sweeps", l.Stats().LiveBuckets)
		}
		l.sweepGently()
	}
	if v := mustValue(t, l, "tb", "busy"); v >= 10 {
		t.Fatalf("a bucket that is not full was dropped (value %v)", v)
	}
}

// A log tail recovered at Open counts toward the snapshot triggers: a
// process that restarts and then writes nothing still snapshots it on the
// interval, and a tail over SnapshotBytes is due at once.
func TestRecoveredTailCountsTowardSnapshot(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rl.db")
	clk := newFakeClock()
	l := openDurable(t, path, clk, nil)
	for i := range 5 {
		mustLimit(t, l, Request{Name: "tb", Key: strconv.Itoa(i), Count: 1})
	}
	written := l.wal.Written()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	l = openDurable(t, path, clk, nil)
	defer l.Close()
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
	mustLimit(t, l, Request{Name: "tb", Key: "x", Count: 1})
	if !l.snapshotDue(later, -1, time.Minute) {
		t.Fatal("interval trigger: a new record after the snapshot is not due")
	}
}
