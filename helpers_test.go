package ratelimit

// Helpers shared by the package's tests: one way to open a limiter (open),
// one clock (ratelimittest.Clock, from t0), configs, and readers of values
// and shards. Tests run against the injected clock, in t.TempDir() when
// durable, and never sleep to wait for goroutines.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed7fbd42b6/ratelimit/internal/actor"
	"github.com/seed7fbd42b6/ratelimit/internal/bucket"
	"github.com/seed7fbd42b6/ratelimit/ratelimittest"
	bolt "go.etcd.io/bbolt"
)

const (
	S = time.Second
	M = time.Minute
	H = time.Hour
)

// t0 is where the tests' clocks start; deliberately not round, so that
// nothing accidentally aligns.
var t0 = time.Date(2025, time.March, 14, 15, 9, 26, 535897932, time.UTC)

var bg = context.Background()

// newClock is a test clock reading t0.
func newClock() *ratelimittest.Clock { return ratelimittest.NewClock(t0) }

// open opens a limiter with opts for t and closes it when t ends (a test
// may close it earlier, and reopen its file). Background work is off
// unless opts asks for it: SweepInterval, SnapshotInterval and
// SnapshotBytes left 0 mean -1 (tests sweep and snapshot explicitly), and
// LogPreallocate left 0 means -1 (the tests of preallocation set it).
// Under ACTOR_QUEUE_ONLY=1 every message queues for the partitions'
// goroutines: no caller runs a partition inline (CI runs the concurrency
// tests both ways, as it does the actor package's).
func open(t testing.TB, opts Options) *Limiter {
	t.Helper()
	for _, d := range []*time.Duration{&opts.SweepInterval, &opts.SnapshotInterval} {
		if *d == 0 {
			*d = -1
		}
	}
	for _, n := range []*int64{&opts.SnapshotBytes, &opts.LogPreallocate} {
		if *n == 0 {
			*n = -1
		}
	}
	opts.queueOnly = os.Getenv("ACTOR_QUEUE_ONLY") == "1"
	l, err := Open(opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if l == nil {
		t.Fatalf("Open returned nil limiter and nil error")
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// limit is l.Limit(bg, r), failing t on an error.
func limit(t testing.TB, l *Limiter, r Request) Status {
	t.Helper()
	st, err := l.Limit(bg, r)
	if err != nil {
		t.Fatalf("Limit(%s): unexpected error %v", reqString(r), err)
	}
	return st
}

// value is l.Value(bg, name, key), failing t on an error.
func value(t testing.TB, l *Limiter, name, key string) Value {
	t.Helper()
	v, err := l.Value(bg, name, key)
	if err != nil {
		t.Fatalf("Value(%q, %q): unexpected error %v", name, shortKey(key), err)
	}
	return v
}

// valEq compares token values. Results that involve a fractional refill may
// differ from the exact real number by float rounding; 1e-9 tokens is far
// below anything observable, and every whole-token case is compared with
// the same helper (an off-by-one is still off by 1).
func valEq(got, want float64) bool {
	if got == want {
		return true
	}
	return math.Abs(got-want) <= 1e-9*math.Max(1, math.Abs(want))
}

// wantValue checks (with valEq) that the bucket (name, key) holds want.
func wantValue(t testing.TB, l *Limiter, name, key string, want float64) Value {
	t.Helper()
	v := value(t, l, name, key)
	if !valEq(v.Value, want) {
		t.Errorf("Value(%q, %q) = %v, want %v", name, shortKey(key), v.Value, want)
	}
	return v
}

// shortKey abbreviates long keys in messages.
func shortKey(k string) string {
	if len(k) > 24 {
		return fmt.Sprintf("%q...(%d bytes)", k[:16], len(k))
	}
	return k
}

func reqString(r Request) string {
	s := fmt.Sprintf("name=%q key=%q count=%v reserve=%v", r.Name, shortKey(r.Key), r.Count, r.Reserve)
	if r.Config != nil {
		s += fmt.Sprintf(" inline=%+v", *r.Config)
	}
	return s
}

// tb, fw and the with* functions build configs.
func tb(rate float64, period time.Duration) Config {
	return Config{Kind: TokenBucket, Rate: rate, Period: period}
}

func fw(rate float64, period time.Duration, start time.Time) Config {
	return Config{Kind: FixedWindow, Rate: rate, Period: period, Start: start}
}

func withCap(c Config, capacity float64) Config {
	c.Capacity = capacity
	return c
}

func withMaxRes(c Config, m float64) Config {
	c.MaxReserved = m
	return c
}

func withShards(c Config, n int) Config {
	c.Shards = n
	return c
}

// durableLimits are the limits of the tests that do not need their own;
// testdata/v1.db was written with them.
var durableLimits = map[string]Config{
	"tb":  {Kind: TokenBucket, Rate: 10, Period: time.Minute},
	"fw":  {Kind: FixedWindow, Rate: 10, Period: time.Minute},
	"sh":  {Kind: TokenBucket, Rate: 40, Period: time.Minute, Shards: 4},
	"big": {Kind: TokenBucket, Rate: 1e9, Period: time.Hour},
}

// limitAllLimits are four limits of the kinds a LimitAll mixes.
func limitAllLimits() map[string]Config {
	return map[string]Config{
		"a": tb(10, M),
		"b": tb(5, M),
		"w": fw(4, M, t0),
		"s": withShards(tb(40, M), 4),
	}
}

// step is one scripted request: at t0+at, ask count (reserve or not), expect
// ok/retry (or err), then expect Value == value with TS == t0+ts.
type step struct {
	at       time.Duration
	count    float64
	reserve  bool
	peek     bool // no request, only check Value
	ok       bool
	retry    time.Duration
	retryMin bool // retry is only a lower bound
	err      error
	value    float64
	ts       time.Duration // expected Value.TS offset from t0
}

// workedCase is a script of steps on one bucket of a limit of cfg.
type workedCase struct {
	name  string
	cfg   Config
	steps []step
}

// runWorkedCases runs each case as a subtest, on a limiter of its own.
func runWorkedCases(t *testing.T, cases []workedCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			l := open(t, Options{Now: clk.Now, Limits: map[string]Config{"lim": tc.cfg}})
			runSteps(t, clk, l, "lim", "k", tc.steps)
		})
	}
}

// runSteps runs steps on (name, key), moving clk.
func runSteps(t *testing.T, clk *ratelimittest.Clock, l *Limiter, name, key string, steps []step) {
	t.Helper()
	for i, s := range steps {
		clk.Set(t0.Add(s.at))
		if !s.peek {
			r := Request{Name: name, Key: key, Count: s.count, Reserve: s.reserve}
			st, err := l.Limit(bg, r)
			switch {
			case s.err != nil:
				if !errors.Is(err, s.err) {
					t.Errorf("step %d (t0+%v, %s): err = %v, want %v", i, s.at, reqString(r), err, s.err)
				}
			case err != nil:
				t.Errorf("step %d (t0+%v, %s): unexpected error %v", i, s.at, reqString(r), err)
			default:
				if st.OK != s.ok {
					t.Errorf("step %d (t0+%v, %s): OK = %v, want %v (status %+v)", i, s.at, reqString(r), st.OK, s.ok, st)
				}
				if s.retryMin {
					if st.RetryAfter < s.retry {
						t.Errorf("step %d (t0+%v, %s): RetryAfter = %v, want >= %v", i, s.at, reqString(r), st.RetryAfter, s.retry)
					}
				} else if st.RetryAfter != s.retry {
					t.Errorf("step %d (t0+%v, %s): RetryAfter = %v, want %v", i, s.at, reqString(r), st.RetryAfter, s.retry)
				}
				if st.Limit != name {
					t.Errorf("step %d: Status.Limit = %q, want %q", i, st.Limit, name)
				}
			}
		}
		v, err := l.Value(bg, name, key)
		if err != nil {
			t.Errorf("step %d: Value: %v", i, err)
			continue
		}
		if !valEq(v.Value, s.value) {
			t.Errorf("step %d (t0+%v): Value = %v, want %v", i, s.at, v.Value, s.value)
		}
		if want := t0.Add(s.ts); !v.TS.Equal(want) {
			t.Errorf("step %d (t0+%v): Value.TS = t0%+v, want t0%+v", i, s.at, v.TS.Sub(t0), s.ts)
		}
	}
}

// checkNeverEarly asks for count at `at` until denied, then retries 1 ms
// before RetryAfter (must be denied) and exactly at it (must be granted).
func checkNeverEarly(t *testing.T, clk *ratelimittest.Clock, l *Limiter, name, key string, at time.Time, count float64) {
	t.Helper()
	clk.Set(at)
	r := Request{Name: name, Key: key, Count: count}
	var st Status
	for i := 0; ; i++ {
		if i == 1000 {
			t.Fatalf("%s: never denied at a frozen clock", reqString(r))
		}
		st = limit(t, l, r)
		if !st.OK {
			break
		}
		if st.RetryAfter != 0 {
			t.Errorf("%s: plain grant with RetryAfter %v", reqString(r), st.RetryAfter)
		}
	}
	if st.RetryAfter <= 0 {
		t.Errorf("%s at t0%+v: denied with RetryAfter %v, want > 0", reqString(r), at.Sub(t0), st.RetryAfter)
		return
	}
	before := value(t, l, name, key)
	if st.RetryAfter > time.Millisecond {
		clk.Set(at.Add(st.RetryAfter - time.Millisecond))
		if st2 := limit(t, l, r); st2.OK {
			t.Errorf("%s denied at t0%+v with RetryAfter %v, but granted 1ms before that (value before %v)",
				reqString(r), at.Sub(t0), st.RetryAfter, before.Value)
			return
		}
	}
	clk.Set(at.Add(st.RetryAfter))
	if st2 := limit(t, l, r); !st2.OK {
		t.Errorf("%s denied at t0%+v with RetryAfter %v, but retrying exactly then is denied again (%+v, value before %v, value now %v)",
			reqString(r), at.Sub(t0), st.RetryAfter, st2, before.Value, value(t, l, name, key).Value)
	}
}

// bucketRef names a bucket.
type bucketRef struct{ name, key string }

// hangTimeout bounds every wait for other goroutines: a wait that takes
// longer is reported as a hang, with every goroutine's stack.
const hangTimeout = 60 * time.Second

// waitDone waits for done to be closed, failing t on a hang.
func waitDone(t testing.TB, done <-chan struct{}, what string) {
	t.Helper()
	timer := time.NewTimer(hangTimeout)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		pprof.Lookup("goroutine").WriteTo(os.Stderr, 2)
		t.Fatalf("hang: waited %v for %s", hangTimeout, what)
	}
}

// wgDone is a channel closed when wg's count reaches zero.
func wgDone(wg *sync.WaitGroup) <-chan struct{} {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	return done
}

// shardValues reads every shard of (name, key), projected to now.
func shardValues(t testing.TB, l *Limiter, name, key string) []float64 {
	t.Helper()
	d, err := l.resolve(name, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := actor.NewCall()
	defer c.Release()
	l.addShards(c, d, key, d.shards)
	l.group.Peek(c)
	now := l.now()
	vs := make([]float64, d.shards)
	for i := range c.Items {
		vs[c.Items[i].ID.Shard] = d.perShard.Project(c.Items[i].State, now).Value
	}
	return vs
}

// liveBuckets counts the buckets the partitions hold.
func liveBuckets(l *Limiter) int {
	total := 0
	for i := 0; i < l.group.Partitions(); i++ {
		l.group.Run(i, func(p *actor.Partition) { total += p.Len() })
	}
	return total
}

// grant is limit that also fails t unless r is granted.
func grant(t testing.TB, l *Limiter, r Request) Status {
	t.Helper()
	st := limit(t, l, r)
	if !st.OK {
		t.Fatalf("Limit(%s) = %+v, want a grant", reqString(r), st)
	}
	return st
}

// tokenBucket is a token bucket of rate tokens a minute and the capacity.
func tokenBucket(rate, capacity float64) Config { return withCap(tb(rate, time.Minute), capacity) }

// deleteBatch deletes the log batch at one end of a limiter's log, every
// chunk of it: end is (*bolt.Cursor).First or Last.
func deleteBatch(tx *bolt.Tx, end func(*bolt.Cursor) ([]byte, []byte)) error {
	c := tx.Bucket([]byte("log")).Cursor()
	k, _ := end(c)
	seq := append([]byte(nil), k[:8]...)
	for k, _ := end(c); k != nil && bytes.HasPrefix(k, seq); k, _ = end(c) {
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
}

// blockingStore is a shared store, as Redis is (its keys expire by the
// limit they were written under: store.Relimiter), whose Decide grants
// every member but first sends on entered and waits for release to be
// closed. A call whose context ends first is abandoned: Decide returns,
// and the store keeps the call until release is closed, as a store whose
// request is already on its way to the server does. Relimited records how
// many calls the store held when it ran.
type blockingStore struct {
	entered, release chan struct{}
	under            atomic.Int32
	mu               sync.Mutex
	relimitedUnder   []int32
	relimitedNames   []string
	relimitErr       error // what Relimited returns (then recording nothing) while set
}

func newBlockingStore() *blockingStore {
	return &blockingStore{entered: make(chan struct{}), release: make(chan struct{})}
}

func (s *blockingStore) Partitions() int            { return 1 }
func (s *blockingStore) Route(uint64, uint32) int32 { return 0 }
func (s *blockingStore) Peek(*actor.Call)           {}
func (s *blockingStore) Reset(*actor.Call)          {}
func (s *blockingStore) Counts() actor.Counts       { return actor.Counts{} }
func (s *blockingStore) Close() error               { return nil }
func (s *blockingStore) Decide(ctx context.Context, c *actor.Call) (bool, error) {
	s.under.Add(1)
	s.entered <- struct{}{}
	select {
	case <-s.release:
	case <-ctx.Done():
		go func() {
			<-s.release
			s.under.Add(-1)
			c.Release()
		}()
		return true, ctx.Err()
	}
	s.under.Add(-1)
	for i := range c.Members {
		c.Members[i].OK = true
	}
	return false, nil
}

func (s *blockingStore) Relimited(name string, _ *bucket.Limit, _ int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.relimitErr != nil {
		return s.relimitErr
	}
	s.relimitedUnder = append(s.relimitedUnder, s.under.Load())
	s.relimitedNames = append(s.relimitedNames, name)
	return nil
}

// failRelimits makes Relimited return err (nil: succeed again).
func (s *blockingStore) failRelimits(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.relimitErr = err
}

// relimits returns what Relimited recorded: the calls held, and the
// limits, of each Relimited so far.
func (s *blockingStore) relimits() ([]int32, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.relimitedUnder), slices.Clone(s.relimitedNames)
}
