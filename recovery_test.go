package ratelimit

// Recovery: what is acknowledged survives failures, fuzzy snapshots, Close
// in flight, config changes and crashed files; what failed is not written.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// commitFailure is a commit failure for Options.beforeCommit, switched on
// and off by the test.
type commitFailure struct{ on atomic.Bool }

func (f *commitFailure) hook(uint64) error {
	if f.on.Load() {
		return errors.New("injected commit failure")
	}
	return nil
}

// A failed commit fails closed: every waiter of the failed batch gets
// ErrUnavailable and OK == false, and every later grant is refused.
func TestCommitFailureFailsClosed(t *testing.T) {
	clk := newClock()
	var mu sync.Mutex
	fail := false
	gate := make(chan struct{})
	l := open(t, Options{Path: filepath.Join(t.TempDir(), "rl.db"), Limits: durableLimits, Now: clk.Now, beforeCommit: func(uint64) error {
		mu.Lock()
		defer mu.Unlock()
		if fail {
			<-gate // hold the failing commit until every caller is queued
			return errors.New("injected disk failure")
		}
		return nil
	}})
	limit(t, l, Request{Name: "big", Key: "warm"})
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

// A credit or reset whose commit failed is answered ErrUnavailable, and
// the partitions still hold it. A Snapshot after the failure (Snapshot's
// doc suggests one "before a planned restart") must not write that state:
// it would make the failed change durable, and a caller who retries a
// credit it was told had failed would credit twice. It fails with
// ErrUnavailable, and after reopening the change is not in effect.
func TestSnapshotAfterFailedChange(t *testing.T) {
	for _, tc := range []struct {
		name  string
		op    func(l *Limiter) error
		retry func(t *testing.T, l *Limiter) // after reopening, if any
	}{
		{"credit", func(l *Limiter) error { return l.Credit(bg, "tb", "k", 4) }, func(t *testing.T, l *Limiter) {
			if err := l.Credit(bg, "tb", "k", 4); err != nil {
				t.Fatal(err)
			}
			if v := value(t, l, "tb", "k").Value; v != 4 {
				t.Errorf("after the retried credit tb/k = %v, want 4 (one credit of 4 acknowledged): credited twice", v)
			}
		}},
		{"reset", func(l *Limiter) error { return l.Reset(bg, "tb", "k") }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "rl.db")
			clk := newClock()
			var f commitFailure
			l := open(t, Options{Path: path, Limits: durableLimits, Now: clk.Now, beforeCommit: f.hook})
			if s := limit(t, l, Request{Name: "tb", Key: "k", Count: 10}); !s.OK {
				t.Fatal("grant of 10 denied")
			}
			f.on.Store(true)
			if err := tc.op(l); !errors.Is(err, ErrUnavailable) {
				t.Fatalf("%s with a failing log: %v, want ErrUnavailable", tc.name, err)
			}
			if err := l.Snapshot(); !errors.Is(err, ErrUnavailable) {
				t.Fatalf("Snapshot after a failed commit: %v, want ErrUnavailable", err)
			}
			if err := l.Close(); !errors.Is(err, ErrUnavailable) {
				t.Fatalf("Close: %v, want the sticky ErrUnavailable", err)
			}
			f.on.Store(false)
			l = open(t, Options{Path: path, Limits: durableLimits, Now: clk.Now})
			if v := value(t, l, "tb", "k").Value; v != 0 {
				t.Errorf("after restart tb/k = %v, want 0: the %s that returned ErrUnavailable was made durable by Snapshot", v, tc.name)
			}
			if tc.retry != nil {
				tc.retry(t, l)
			}
		})
	}
}

// Without a snapshot in between, a sticky failure loses nothing that was
// acknowledged and persists nothing that failed: grants, a credit and a
// reset acknowledged before the failure survive Close and reopen; those
// answered ErrUnavailable do not.
func TestRecoveryStickyFailureThenCloseReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rl.db")
	clk := newClock()
	var f commitFailure
	l := open(t, Options{Path: path, Limits: durableLimits, Now: clk.Now, beforeCommit: f.hook})
	limit(t, l, Request{Name: "tb", Key: "a", Count: 6})
	if err := l.Credit(bg, "tb", "a", 2); err != nil {
		t.Fatal(err)
	}
	limit(t, l, Request{Name: "tb", Key: "r", Count: 9})
	if err := l.Reset(bg, "tb", "r"); err != nil {
		t.Fatal(err)
	}
	limit(t, l, Request{Name: "sh", Count: 12})
	limit(t, l, Request{Name: "fw", Key: "a", Count: 3})

	f.on.Store(true)
	for _, r := range []Request{{Name: "tb", Key: "a", Count: 1}, {Name: "sh", Count: 5}, {Name: "fw", Key: "a"}, {Name: "tb", Key: "r", Count: 2}} {
		if s, err := l.Limit(bg, r); !errors.Is(err, ErrUnavailable) || s.OK {
			t.Fatalf("Limit(%+v) with a failing log = %+v, %v", r, s, err)
		}
	}
	if err := l.Credit(bg, "tb", "a", 1); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Credit: %v", err)
	}
	if err := l.Close(); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Close: %v, want ErrUnavailable", err)
	}
	f.on.Store(false)
	l = open(t, Options{Path: path, Limits: durableLimits, Now: clk.Now})
	for _, c := range []struct {
		name, key string
		want      float64
	}{{"tb", "a", 6}, {"tb", "r", 10}, {"sh", "", 28}, {"fw", "a", 7}} {
		if got := value(t, l, c.name, c.key).Value; got != c.want {
			t.Errorf("%s/%s after reopen = %v, want %v", c.name, c.key, got, c.want)
		}
	}
}

// A failure that begins while a snapshot copies: grants acknowledged before
// it survive; nothing acknowledged is lost whatever the snapshot wrote.
func TestRecoverySnapshotAfterFailureKeepsAcknowledged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rl.db")
	clk := newClock()
	var f commitFailure
	l := open(t, Options{Path: path, Limits: durableLimits, Now: clk.Now, beforeCommit: f.hook})
	for i := 0; i < 5; i++ {
		limit(t, l, Request{Name: "big", Key: "k" + strconv.Itoa(i), Count: float64(i + 1)})
	}
	if err := l.Snapshot(); err != nil {
		t.Fatal(err)
	}
	limit(t, l, Request{Name: "big", Key: "k0", Count: 100})
	f.on.Store(true)
	l.Limit(bg, Request{Name: "big", Key: "k1", Count: 1000})
	_ = l.Snapshot()
	_ = l.Close()
	f.on.Store(false)
	l = open(t, Options{Path: path, Limits: durableLimits, Now: clk.Now})
	for i := 0; i < 5; i++ {
		want := 1e9 - float64(i+1)
		if i == 0 {
			want -= 100
		}
		got := value(t, l, "big", "k"+strconv.Itoa(i)).Value
		if got > want {
			t.Errorf("k%d = %v, more than %v: an acknowledged grant was lost", i, got, want)
		}
	}
}

// Snapshots taken back to back while grants, credits, sharded grants,
// LimitAll, LimitMany and resets run: with a frozen clock and integer
// counts, every bucket after Close and reopen is exactly capacity minus the
// acknowledged grants plus the acknowledged credits.
func TestRecoveryFuzzySnapshotUnderLoadExact(t *testing.T) {
	for _, parts := range []int{1, 3, 16} {
		for _, slow := range []bool{false, true} {
			t.Run(fmt.Sprintf("partitions=%d/slowCommits=%v", parts, slow), func(t *testing.T) { fuzzySnapshot(t, parts, slow) })
		}
	}
}

func fuzzySnapshot(t *testing.T, parts int, slow bool) {
	const capacity = 1e9
	limits := map[string]Config{
		"k":  {Kind: TokenBucket, Rate: capacity, Period: time.Hour},
		"sh": {Kind: TokenBucket, Rate: capacity, Period: time.Hour, Shards: 4},
		"fw": {Kind: FixedWindow, Rate: capacity, Period: time.Hour},
	}
	path := filepath.Join(t.TempDir(), "rl.db")
	clk := newClock()
	opts := Options{Path: path, Limits: limits, Now: clk.Now, Partitions: parts}
	if slow { // widen the window between a batch's Append and its commit
		opts.beforeCommit = func(uint64) error {
			for i := 0; i < 50; i++ {
				runtime.Gosched()
			}
			return nil
		}
	}
	l := open(t, opts)
	keys := []string{"a", "b", "c", "d", "e"}
	var mu sync.Mutex
	used := map[string]float64{} // "name/key" -> acknowledged net use
	add := func(k string, n float64) { mu.Lock(); used[k] += n; mu.Unlock() }

	workers := 8
	iters := 400
	if testing.Short() {
		iters = 100
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var snaps atomic.Int64
	snapDone := make(chan struct{})
	kick := make(chan struct{}, 1) // workers ask for a snapshot as they go
	go func() {
		defer close(snapDone)
		for {
			select {
			case <-stop:
				return
			case <-kick:
			}
			if err := l.Snapshot(); err != nil {
				t.Errorf("Snapshot: %v", err)
				return
			}
			snaps.Add(1)
		}
	}()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < iters; i++ {
				select {
				case kick <- struct{}{}:
				default:
				}
				k := keys[(w+i)%len(keys)]
				n := float64(1 + (w+i)%3)
				switch i % 6 {
				case 0, 1:
					if s, err := l.Limit(bg, Request{Name: "k", Key: k, Count: n}); err == nil && s.OK {
						add("k/"+k, n)
						if i%4 == 0 {
							if err := l.Credit(bg, "k", k, n); err == nil {
								add("k/"+k, -n)
							} else {
								t.Errorf("Credit: %v", err)
							}
						}
					} else {
						t.Errorf("Limit = %+v, %v", s, err)
					}
				case 2:
					if s, err := l.Limit(bg, Request{Name: "sh", Key: k, Count: n}); err == nil && s.OK {
						add("sh/"+k, n)
						if i%4 == 0 {
							if err := l.Credit(bg, "sh", k, n); err == nil {
								add("sh/"+k, -n)
							} else {
								t.Errorf("Credit sh: %v", err)
							}
						}
					} else {
						t.Errorf("Limit sh = %+v, %v", s, err)
					}
				case 3:
					if s, err := l.LimitAll(bg, Request{Name: "k", Key: k, Count: n}, Request{Name: "sh", Key: k, Count: n}, Request{Name: "fw", Key: k, Count: n}); err == nil && s.OK {
						add("k/"+k, n)
						add("sh/"+k, n)
						add("fw/"+k, n)
					} else {
						t.Errorf("LimitAll = %+v, %v", s, err)
					}
				case 4:
					rs := make([]Request, 0, len(keys))
					for _, k := range keys {
						rs = append(rs, Request{Name: "fw", Key: k, Count: n})
					}
					for j, d := range l.LimitMany(bg, rs, nil) {
						if d.Err == nil && d.OK {
							add("fw/"+rs[j].Key, n)
						} else {
							t.Errorf("LimitMany = %+v", d)
						}
					}
				case 5:
					// Reset a key only this worker uses, then grant on it.
					own := "own" + strconv.Itoa(w)
					if err := l.Reset(bg, "k", own); err != nil {
						t.Errorf("Reset: %v", err)
					}
					mu.Lock()
					used["k/"+own] = 0
					mu.Unlock()
					if s, err := l.Limit(bg, Request{Name: "k", Key: own, Count: n}); err == nil && s.OK {
						add("k/"+own, n)
					}
				}
			}
		}(w)
	}
	wg.Wait()
	close(stop)
	<-snapDone
	before := map[string]float64{}
	for k := range used {
		name, key, _ := cutRef(k)
		before[k] = value(t, l, name, key).Value
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = open(t, opts)
	for k, u := range used {
		name, key, _ := cutRef(k)
		got := value(t, l, name, key).Value
		if got != before[k] {
			t.Errorf("%s after reopen = %v, before close %v", k, got, before[k])
		}
		// Sharded credits water-fill with fractions: allow float rounding.
		if want := capacity - u; got != want && (name != "sh" || math.Abs(got-want) > 1e-3) {
			t.Errorf("%s after reopen = %v, want %v", k, got, want)
		}
	}
	t.Logf("%d snapshots under load", snaps.Load())
}

func cutRef(s string) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// Close while callers grant, credit and snapshot: every acknowledged grant
// and credit survives reopening,
// and nothing answered with an error was written (frozen clock: exact).
func TestRecoveryCloseWhileGrantingExact(t *testing.T) {
	const capacity = 1e9
	path := filepath.Join(t.TempDir(), "rl.db")
	clk := newClock()
	limits := map[string]Config{
		"k":  {Kind: TokenBucket, Rate: capacity, Period: time.Hour},
		"sh": {Kind: TokenBucket, Rate: capacity, Period: time.Hour, Shards: 4},
	}
	opts := Options{Path: path, Limits: limits, Now: clk.Now, Partitions: 4}
	counted := map[string]float64{} // used, as counted after the last reopen
	for round := 0; round < 3; round++ {
		l := open(t, opts)
		var mu sync.Mutex
		used := map[string]float64{}
		add := func(k string, n float64) { mu.Lock(); used[k] += n; mu.Unlock() }
		if round == 0 { // a debt the credits below cannot repay: none is capped
			for k := range 3 {
				if !limit(t, l, Request{Name: "sh", Key: strconv.Itoa(k), Count: 1000}).OK {
					t.Fatal("a debt of 1000 was refused")
				}
				add("sh/"+strconv.Itoa(k), 1000)
			}
		}
		var ops atomic.Int64
		var wg sync.WaitGroup
		for w := 0; w < 12; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for i := 0; ; i++ {
					k := strconv.Itoa((w + i) % 3)
					n := float64(1 + i%3)
					var err error
					switch i % 4 {
					case 0:
						var s Status
						if s, err = l.Limit(bg, Request{Name: "k", Key: k, Count: n}); err == nil && s.OK {
							add("k/"+k, n)
						}
					case 1:
						var s Status
						if s, err = l.Limit(bg, Request{Name: "sh", Key: k, Count: n}); err == nil && s.OK {
							add("sh/"+k, n)
						}
					case 2:
						var s Status
						if s, err = l.LimitAll(bg, Request{Name: "k", Key: k, Count: n}, Request{Name: "sh", Key: k, Count: n}); err == nil && s.OK {
							add("k/"+k, n)
							add("sh/"+k, n)
						}
					default:
						if err = l.Credit(bg, "sh", k, 1); err == nil {
							add("sh/"+k, -1)
						}
					}
					ops.Add(1)
					if err != nil {
						if !errors.Is(err, ErrClosed) {
							t.Errorf("unexpected %v", err)
						}
						return
					}
				}
			}(w)
		}
		snapDone := make(chan struct{})
		go func() { // snapshots until Close, one per 20 operations or so
			defer close(snapDone)
			for last := int64(0); ; {
				for ops.Load() < last+20 && !l.closed.Load() {
					runtime.Gosched()
				}
				last = ops.Load()
				if err := l.Snapshot(); err != nil {
					if !errors.Is(err, ErrClosed) {
						t.Errorf("Snapshot: %v", err)
					}
					return
				}
			}
		}()
		for ops.Load() < int64(500*(round+1)) {
			runtime.Gosched()
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		<-snapDone
		l = open(t, opts)
		for k, u := range used {
			name, key, _ := cutRef(k)
			prev := counted[k]
			got := capacity - value(t, l, name, key).Value
			if got != prev+u && (name != "sh" || math.Abs(got-prev-u) > 1e-3) {
				t.Errorf("round %d: %s counts %v used, acknowledged %v", round, k, got, prev+u)
			}
			counted[k] = got
		}
		l.Close()
	}
}

// Buckets of a limit removed from Options.Limits, or of shards beyond a
// reduced shard count, are kept through snapshots and restarts; when the
// limit comes back, its state is back (nothing acknowledged was lost).
func TestRecoveryRemovedLimitAndShardsKeptThroughSnapshots(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rl.db")
	clk := newClock()
	full := map[string]Config{
		"gone": {Kind: TokenBucket, Rate: 10, Period: time.Hour},
		"sh":   {Kind: TokenBucket, Rate: 40, Period: time.Hour, Shards: 4},
	}
	reopen := func(limits map[string]Config) *Limiter {
		return open(t, Options{Path: path, Limits: limits, Now: clk.Now})
	}
	l := reopen(full)
	limit(t, l, Request{Name: "gone", Key: "x", Count: 7})
	for i := 0; i < 12; i++ {
		limit(t, l, Request{Name: "sh", Key: "y", Count: 3})
	}
	before := shardValues(t, l, "sh", "y")
	l.Close()
	// Run 2: "gone" removed, "sh" down to 2 shards; snapshot twice.
	l = reopen(map[string]Config{"sh": {Kind: TokenBucket, Rate: 40, Period: time.Hour, Shards: 2}})
	clk.Advance(time.Second)
	if err := l.Snapshot(); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l = reopen(map[string]Config{})
	if err := l.Snapshot(); err != nil {
		t.Fatal(err)
	}
	l.Close()
	// Run 3: back as they were.
	l = reopen(full)
	if v := value(t, l, "gone", "x").Value; v > 3+10.0/3600+1e-9 {
		t.Errorf("gone/x = %v after the limit came back, want about 3", v)
	}
	after := shardValues(t, l, "sh", "y")
	for i := range before {
		if after[i] > before[i]+1.0/360+1e-9 {
			t.Errorf("sh/y shard %d = %v, was %v: state lost", i, after[i], before[i])
		}
	}
}

// An inline-only limit's buckets survive a restart, a snapshot taken before
// any request carried the config again, and a second restart.
func TestRecoveryInlineLimitSurvivesSnapshotBeforeUse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rl.db")
	clk := newClock()
	cfg := &Config{Kind: FixedWindow, Rate: 10, Period: time.Hour}
	l := open(t, Options{Path: path, Limits: durableLimits, Now: clk.Now})
	limit(t, l, Request{Name: "inl", Key: "k", Count: 8, Config: cfg})
	limit(t, l, Request{Name: "inl-sh", Key: "k", Count: 8, Config: &Config{Kind: TokenBucket, Rate: 10, Period: time.Hour, Shards: 2}})
	l.Close()
	for i := 0; i < 2; i++ {
		l = open(t, Options{Path: path, Limits: durableLimits, Now: clk.Now})
		clk.Advance(time.Second)
		if err := l.Snapshot(); err != nil {
			t.Fatal(err)
		}
		l.Close()
	}
	l = open(t, Options{Path: path, Limits: durableLimits, Now: clk.Now})
	if s := limit(t, l, Request{Name: "inl", Key: "k", Count: 3, Config: cfg}); s.OK {
		t.Errorf("inline fixed window granted 3 more in the same window after restarts: its 8 were lost")
	}
	if s := limit(t, l, Request{Name: "inl-sh", Key: "k", Count: 3, Config: &Config{Kind: TokenBucket, Rate: 10, Period: time.Hour, Shards: 2}}); s.OK {
		t.Errorf("inline sharded limit granted 3 more: its 8 were lost")
	}
}

// With a moving clock (buckets refill, sweeps and snapshots drop full ones),
// snapshots and sweeps under load: after Close and reopen every bucket's
// value equals what the limiter reported just before Close.
func TestRecoverySnapshotsAndSweepsWithMovingClockMatchMemory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rl.db")
	clk := newClock()
	limits := map[string]Config{
		"tb": {Kind: TokenBucket, Rate: 10, Period: time.Second},
		"fw": {Kind: FixedWindow, Rate: 10, Period: time.Second, Capacity: 15},
		"sh": {Kind: TokenBucket, Rate: 40, Period: time.Second, Shards: 4},
		"rs": {Kind: TokenBucket, Rate: 5, Period: time.Second, MaxReserved: 20},
	}
	opts := Options{Path: path, Limits: limits, Now: clk.Now, Partitions: 4}
	l := open(t, opts)
	const nkeys = 20
	var wg sync.WaitGroup
	stop := make(chan struct{})
	janitor := make(chan struct{})
	kick := make(chan struct{}, 1) // workers ask for a step as they go
	go func() {                    // clock, snapshots and sweeps
		defer close(janitor)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-kick:
			}
			clk.Advance(time.Duration(1+i%7) * 37 * time.Millisecond)
			switch i % 3 {
			case 0:
				if err := l.Snapshot(); err != nil {
					t.Errorf("Snapshot: %v", err)
					return
				}
			case 1:
				l.sweepGently()
			default:
				l.sweep()
			}
		}
	}()
	for w := 0; w < 6; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 600; i++ {
				select {
				case kick <- struct{}{}:
				default:
				}
				k := strconv.Itoa((w*7 + i) % nkeys)
				n := float64(1 + i%4)
				var err error
				switch i % 7 {
				case 0:
					_, err = l.Limit(bg, Request{Name: "tb", Key: k, Count: n})
				case 1:
					_, err = l.Limit(bg, Request{Name: "fw", Key: k, Count: n})
				case 2:
					_, err = l.Limit(bg, Request{Name: "sh", Key: k, Count: n})
				case 3:
					_, err = l.Limit(bg, Request{Name: "rs", Key: k, Count: n, Reserve: true})
				case 4:
					_, err = l.LimitAll(bg, Request{Name: "tb", Key: k, Count: n}, Request{Name: "sh", Key: k, Count: n}, Request{Name: "fw", Key: k})
				case 5:
					err = l.Credit(bg, []string{"tb", "sh", "rs", "fw"}[i%4], k, n)
				default:
					if i%5 == 0 {
						err = l.Reset(bg, "tb", k)
					} else {
						_, err = l.Limit(bg, Request{Name: "tb", Key: k, Count: n})
					}
				}
				if err != nil {
					t.Errorf("op %d: %v", i%7, err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(stop)
	<-janitor
	before := map[string][]float64{}
	for name := range limits {
		for k := 0; k < nkeys; k++ {
			before[name+"/"+strconv.Itoa(k)] = shardValues(t, l, name, strconv.Itoa(k))
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = open(t, opts)
	for nk, want := range before {
		name, key, _ := cutRef(nk)
		got := shardValues(t, l, name, key)
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("%s shard %d after reopen = %v, before close %v", nk, i, got[i], want[i])
			}
		}
	}
}

// boltGeometry returns the bbolt file's page size and high-water mark
// (the end of the pages its current meta uses).
func boltGeometry(t *testing.T, path string) (page int, hwm int64) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.View(func(tx *bolt.Tx) error { hwm = tx.Size(); return nil }); err != nil {
		t.Fatal(err)
	}
	return db.Info().PageSize, hwm
}

// A crash during Open's preallocation leaves the file cut anywhere past the
// used pages (zeros up to there); a crash during a commit that grew the
// file leaves garbage past them. Reopening recovers everything, keeps
// working, and the next reopen too.
func TestRecoveryReopenAfterPartialPreallocationAndGarbageTail(t *testing.T) {
	for _, tc := range []struct {
		name string
		mess func(t *testing.T, path string, page int, hwm int64)
	}{
		{"cut-unaligned", func(t *testing.T, path string, page int, hwm int64) {
			if err := os.Truncate(path, hwm+1234); err != nil {
				t.Fatal(err)
			}
		}},
		{"cut-at-hwm", func(t *testing.T, path string, page int, hwm int64) {
			if err := os.Truncate(path, hwm); err != nil {
				t.Fatal(err)
			}
		}},
		{"garbage-past-hwm", func(t *testing.T, path string, page int, hwm int64) {
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			junk := make([]byte, 40*page+77)
			for i := range junk {
				junk[i] = byte(i*131 + 7)
			}
			if _, err := f.WriteAt(junk, hwm); err != nil {
				t.Fatal(err)
			}
			f.Close()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "rl.db")
			clk := newClock()
			opts := Options{Path: path, Limits: durableLimits, Now: clk.Now, LogPreallocate: 1 << 20}
			l := open(t, opts)
			limit(t, l, Request{Name: "big", Key: "a", Count: 5})
			limit(t, l, Request{Name: "sh", Count: 7})
			if err := l.Snapshot(); err != nil {
				t.Fatal(err)
			}
			limit(t, l, Request{Name: "big", Key: "a", Count: 6})
			l.Close()
			page, hwm := boltGeometry(t, path)
			tc.mess(t, path, page, hwm)
			l = open(t, opts)
			if v := value(t, l, "big", "a").Value; v != 1e9-11 {
				t.Errorf("big/a = %v after reopen, want %v", v, 1e9-11)
			}
			for i := 0; i < 50; i++ { // grow the file past the messed tail
				limit(t, l, Request{Name: "big", Key: "k" + strconv.Itoa(i), Count: 1})
			}
			limit(t, l, Request{Name: "big", Key: "a", Count: 1})
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l = open(t, opts)
			if v := value(t, l, "big", "a").Value; v != 1e9-12 {
				t.Errorf("big/a = %v after second reopen, want %v", v, 1e9-12)
			}
			if v := value(t, l, "sh", "").Value; v != 33 {
				t.Errorf("sh = %v, want 33", v)
			}
		})
	}
}

// A crash in the middle of a bbolt commit: the data pages of the last
// transaction are written but its meta page is not. Open falls back to the
// previous meta; the last batch is entirely absent (its callers were never
// acknowledged), everything before it is present, and the log goes on from
// there. A torn meta page is damage: Open refuses it and Salvage recovers
// the same state.
func TestRecoveryTornLastCommitFallsBackWhole(t *testing.T) {
	for _, torn := range []bool{false, true} {
		t.Run("tornMeta="+strconv.FormatBool(torn), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "rl.db")
			clk := newClock()
			opts := Options{Path: path, Limits: durableLimits, Now: clk.Now, LogPreallocate: 1 << 20, Partitions: 1}
			l := open(t, opts)
			limit(t, l, Request{Name: "big", Key: "a", Count: 5})
			if err := l.Snapshot(); err != nil {
				t.Fatal(err)
			}
			limit(t, l, Request{Name: "big", Key: "a", Count: 6})
			l.Close()
			f1, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			l = open(t, opts)
			// One commit (one bbolt transaction): a batch of records.
			rs := make([]Request, 300)
			for i := range rs {
				rs[i] = Request{Name: "big", Key: "n" + strconv.Itoa(i), Count: 2}
			}
			rs[0] = Request{Name: "big", Key: "a", Count: 100}
			for _, d := range l.LimitMany(bg, rs, nil) {
				if d.Err != nil || !d.OK {
					t.Fatal(d)
				}
			}
			if st := l.Stats(); st.WALCommits != 1 {
				t.Fatalf("%d commits, want 1 (the test needs one transaction)", st.WALCommits)
			}
			l.Close()
			f2, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			page, _ := boltGeometry(t, path)
			// The meta slot the last transaction wrote is the one that
			// differs; put back its previous content (or tear it).
			changed := -1
			for s := 0; s < 2; s++ {
				if string(f1[s*page:(s+1)*page]) != string(f2[s*page:(s+1)*page]) {
					if changed >= 0 {
						t.Fatal("both meta pages changed: more than one transaction")
					}
					changed = s
				}
			}
			if changed < 0 {
				t.Fatal("no meta page changed")
			}
			f3 := append([]byte(nil), f2...)
			if torn {
				for i := changed*page + 40; i < changed*page+60; i++ {
					f3[i] ^= 0xff
				}
			} else {
				copy(f3[changed*page:(changed+1)*page], f1[changed*page:(changed+1)*page])
			}
			if err := os.WriteFile(path, f3, 0o600); err != nil {
				t.Fatal(err)
			}
			if torn {
				// A damaged meta page cannot be told from one damaged after
				// its commit was acknowledged: Open refuses, and Salvage
				// reads the previous transaction, reporting the loss.
				if _, err := Open(opts); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("Open with a torn meta page = %v, want ErrCorrupt", err)
				}
				salvaged := path + ".salvaged"
				rep, err := Salvage(path, salvaged)
				if err != nil || len(rep.Problems) == 0 {
					t.Fatalf("Salvage = %+v, %v; want the torn meta page reported", rep, err)
				}
				opts.Path = salvaged
			}
			l = open(t, opts)
			if v := value(t, l, "big", "a").Value; v != 1e9-11 {
				t.Errorf("big/a = %v, want %v (the torn batch absent, the rest present)", v, 1e9-11)
			}
			if v := value(t, l, "big", "n5").Value; v != 1e9 {
				t.Errorf("big/n5 = %v, want full", v)
			}
			limit(t, l, Request{Name: "big", Key: "a", Count: 1})
			for i := 0; i < 20; i++ {
				limit(t, l, Request{Name: "big", Key: "m" + strconv.Itoa(i)})
			}
			if err := l.Snapshot(); err != nil {
				t.Fatal(err)
			}
			limit(t, l, Request{Name: "big", Key: "a", Count: 1})
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l = open(t, opts)
			if v := value(t, l, "big", "a").Value; v != 1e9-13 {
				t.Errorf("big/a = %v after continuing, want %v", v, 1e9-13)
			}
		})
	}
}

// Recovery refuses a file whose log does not continue from its snapshot:
// the snapshot's bucket gone (its position would read 0, and every batch
// it covered was truncated), the first batch after the snapshot gone, or
// the last batch gone.
// Opening either would forget acknowledged grants.
func TestRecoveryRefusesALogThatDoesNotContinueTheSnapshot(t *testing.T) {
	for _, c := range []struct {
		name   string
		damage func(tx *bolt.Tx) error
	}{
		{"snapshot missing", func(tx *bolt.Tx) error { return tx.DeleteBucket([]byte("snapshot")) }},
		{"last batch missing", func(tx *bolt.Tx) error { return deleteBatch(tx, (*bolt.Cursor).Last) }},
		{"first batch after it missing", func(tx *bolt.Tx) error { return deleteBatch(tx, (*bolt.Cursor).First) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "rl.db")
			clk := newClock()
			opts := Options{Path: path, Limits: durableLimits, Now: clk.Now}
			l := open(t, opts)
			for i := range 3 {
				limit(t, l, Request{Name: "tb", Key: fmt.Sprint("k", i), Count: 5})
			}
			if err := l.Snapshot(); err != nil {
				t.Fatal(err)
			}
			limit(t, l, Request{Name: "tb", Key: "k0", Count: 1})
			limit(t, l, Request{Name: "tb", Key: "k1", Count: 1})
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Update(c.damage); err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			if l, err := Open(opts); !errors.Is(err, ErrCorrupt) {
				if err == nil {
					l.Close()
				}
				t.Fatalf("Open: %v, want ErrCorrupt", err)
			}
		})
	}
}
