package actor

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed7fbd42b6/ratelimit/internal/bucket"
	"github.com/seed7fbd42b6/ratelimit/internal/wal"
)

// t0 is the frozen clock's reading.
const t0 = int64(1_700_000_000_000_000_000)

func frozen() int64 { return t0 }

// hangTimeout bounds every wait in these tests: a wait that takes longer is
// reported as a hang, with every goroutine's stack.
const hangTimeout = 20 * time.Second

// tokenLim is a token bucket of capacity c refilling c per hour (so a
// frozen clock refills nothing).
func tokenLim(c float64) *bucket.Limit {
	return &bucket.Limit{Kind: bucket.TokenBucket, Rate: c, Period: int64(time.Hour), Capacity: c}
}

// fakeLog is a Log whose failure and commit timing the test controls.
type fakeLog struct {
	mu       sync.Mutex
	err      error         // what Err reports
	hold     bool          // keep waiters until release
	waiters  []wal.Waiter  // held waiters
	recs     []wal.Record  // everything appended
	commit   error         // what Committed reports when not held
	appended chan struct{} // if set, one token per Append (non-blocking)
}

func (l *fakeLog) Append(recs []wal.Record, w wal.Waiter) {
	l.mu.Lock()
	l.recs = append(l.recs, recs...)
	if l.appended != nil {
		select {
		case l.appended <- struct{}{}:
		default:
		}
	}
	if l.hold {
		l.waiters = append(l.waiters, w)
		l.mu.Unlock()
		return
	}
	err := l.commit
	l.mu.Unlock()
	w.Committed(err)
}

func (l *fakeLog) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

func (l *fakeLog) setErr(err error) {
	l.mu.Lock()
	l.err = err
	l.mu.Unlock()
}

// release commits every held waiter with err and stops holding.
func (l *fakeLog) release(err error) {
	l.mu.Lock()
	ws := l.waiters
	l.waiters, l.hold = nil, false
	l.mu.Unlock()
	for _, w := range ws {
		w.Committed(err)
	}
}

func (l *fakeLog) held() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.waiters)
}

func (l *fakeLog) records() []wal.Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]wal.Record(nil), l.recs...)
}

// newGroup starts n partitions and stops them at the end of the test.
func newGroup(t testing.TB, n int, log Log, clock func() int64) *Group {
	g := testGroup(n, log, clock)
	g.Start()
	t.Cleanup(g.Stop)
	return g
}

// testGroup is NewGroup, with every message queued for the partitions'
// goroutines under ACTOR_QUEUE_ONLY=1 (CI runs the package's tests both
// ways: callers running idle partitions inline, and never).
func testGroup(n int, log Log, clock func() int64) *Group {
	g := NewGroup(n, log, clock)
	if os.Getenv("ACTOR_QUEUE_ONLY") == "1" {
		g.QueueOnly()
	}
	return g
}

// keyOn returns the i-th key (in search order) whose bucket of name (shard
// 0) lives on partition part.
func keyOn(g *Group, name string, part int32, i int) string {
	for k := 0; ; k++ {
		key := fmt.Sprintf("k%d", k)
		if g.Route(bucket.Hash(name, key), 0) == part {
			if i == 0 {
				return key
			}
			i--
		}
	}
}

// itemFor is the item of bucket (name, key, shard) under lim.
func itemFor(g *Group, lim *bucket.Limit, name, key string, shard uint32) Item {
	h := bucket.Hash(name, key)
	return Item{
		ID:   BucketID{Name: name, Key: key, Shard: shard},
		Hash: bucket.ShardHash(bucket.TableHash(bucket.NameHash(name), key), shard),
		Lim:  lim,
		Part: g.Route(h, shard),
	}
}

// takeCall is an atomic call taking count from every item (one member each).
func takeCall(count float64, items ...Item) *Call {
	c := NewCall()
	c.Atomic = true
	for _, it := range items {
		m := int32(len(c.Members))
		i := c.AddItem(it, m, false)
		c.Members = append(c.Members, Member{Op: OpTake, Count: count, First: i, Second: -1})
	}
	return c
}

// twoCall is a single two-choice take of count over shards a and b.
func twoCall(count float64, reserve bool, a, b Item) *Call {
	c := NewCall()
	c.Atomic = true
	ia := c.AddItem(a, 0, false)
	ib := c.AddItem(b, 0, true)
	c.Members = append(c.Members, Member{Op: OpTake, Count: count, Reserve: reserve, First: ia, Second: ib})
	return c
}

// decide runs c to completion with a background context.
func decide(t testing.TB, g *Group, c *Call) {
	t.Helper()
	if _, err := g.Decide(context.Background(), c); err != nil {
		t.Fatalf("Decide: %v", err)
	}
}

// state reads a bucket's stored state on its partition's goroutine.
func state(t testing.TB, g *Group, it Item) (bucket.State, bool) {
	t.Helper()
	var e entry
	var ok bool
	if !g.Run(int(it.Part), func(p *Partition) { e, ok = p.buckets.get(it.Hash, it.ID) }) {
		t.Fatalf("Run on partition %d: stopped", it.Part)
	}
	return e.s, ok
}

// value is a bucket's stored value, its capacity when absent.
func value(t testing.TB, g *Group, it Item) float64 {
	t.Helper()
	s, ok := state(t, g, it)
	if !ok {
		return it.Lim.Capacity
	}
	return s.Value
}

// blockPartition parks partition i's goroutine inside a Run until the
// returned function is called; messages sent meanwhile queue in its inbox.
func blockPartition(t testing.TB, g *Group, i int) (unblock func()) {
	t.Helper()
	entered, rel, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		g.Run(i, func(*Partition) { close(entered); <-rel })
	}()
	waitChan(t, entered, "partition to enter the blocking Run")
	var once sync.Once
	return func() {
		once.Do(func() {
			close(rel)
			waitChan(t, done, "blocking Run to return")
		})
	}
}

// inbox is how many messages partition p has queued.
func inbox(p *Partition) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.inbox)
}

// waitUntil polls cond (yielding, never sleeping) until it holds.
func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(hangTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			hang(t, what)
		}
		runtime.Gosched()
	}
}

// waitChan waits for ch to be closed or receive.
func waitChan[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	timer := time.NewTimer(hangTimeout)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		hang(t, what)
	}
	panic("unreachable")
}

func hang(t testing.TB, what string) {
	t.Helper()
	pprof.Lookup("goroutine").WriteTo(os.Stderr, 2)
	t.Fatalf("hang: waited %v for %s", hangTimeout, what)
}

// spawn starts n workers, worker w running fn with its own generator
// (PCG seeded base+w, stream), and returns a channel closed once every
// worker has returned.
func spawn(n int, base, stream uint64, fn func(r *rand.Rand)) <-chan struct{} {
	var wg sync.WaitGroup
	for w := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(rand.New(rand.NewPCG(base+uint64(w), stream)))
		}()
	}
	return async(wg.Wait)
}

// async runs f on a new goroutine and returns a channel closed when it ends.
func async(f func()) <-chan struct{} {
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	return done
}

// parkedOn counts the messages parked on id at partition part.
func parkedOn(t testing.TB, g *Group, part int32, id BucketID) (n int) {
	t.Helper()
	g.Run(int(part), func(p *Partition) { n = len(p.parked[id]) })
	return n
}

// holdsAndParked reports every partition's held and parked counts.
func holdsAndParked(t testing.TB, g *Group) (held, parked int) {
	t.Helper()
	for i := range g.parts {
		g.Run(i, func(p *Partition) {
			held += len(p.held)
			for _, q := range p.parked {
				parked += len(q)
			}
		})
	}
	return held, parked
}

// callTracker catches a Call handed out by the pool while its previous
// owner still uses it (a double Release, or a Release while in use). A
// caller that abandoned its call hands it to the partitions, which may
// recycle it before that caller has even returned: such a handover is not
// a conflict.
type callTracker struct {
	inUse     sync.Map // *Call -> *callOwner
	mu        sync.Mutex
	conflicts []*callOwner // previous owners of calls handed out again
}

type callOwner struct{ abandoned bool }

func (ct *callTracker) get(c *Call) (*Call, *callOwner) {
	o := new(callOwner)
	if old, loaded := ct.inUse.Swap(c, o); loaded {
		ct.mu.Lock()
		ct.conflicts = append(ct.conflicts, old.(*callOwner))
		ct.mu.Unlock()
	}
	return c, o
}

// done is called when the owner gives c up: before Release, or after
// Decide reported it abandoned.
func (ct *callTracker) done(c *Call, o *callOwner, abandoned bool) {
	o.abandoned = abandoned
	ct.inUse.CompareAndDelete(c, o)
}

// dups counts the handovers from owners that had not given their call up
// (call after every owner is done).
func (ct *callTracker) dups() (n int) {
	for _, o := range ct.conflicts {
		if !o.abandoned {
			n++
		}
	}
	return n
}

// decideCancelable decides c under a context cancelled before Decide (how
// 0), while it runs (how 1) or never (how 2). It reports whether Decide
// returned the context's error, which must come with abandonment: c then
// belongs to the partitions and must not be released.
func decideCancelable(t testing.TB, g *Group, c *Call, how int) (ended bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	switch how {
	case 0:
		cancel()
	case 1:
		go cancel()
	}
	abandoned, err := g.Decide(ctx, c)
	cancel()
	if err != nil && !abandoned {
		t.Errorf("Decide error without abandonment: %v", err)
	}
	return err != nil
}

// trackedTake takes one token of it under decideCancelable(how), with c
// tracked by tr, and counts the outcome: one in abandoned if the caller
// gave the call up, one in acked if it was granted.
func trackedTake(t testing.TB, g *Group, tr *callTracker, it Item, how int, acked, abandoned *atomic.Int64) {
	t.Helper()
	c, o := tr.get(takeCall(1, it))
	if decideCancelable(t, g, c, how) {
		abandoned.Add(1)
		tr.done(c, o, true)
		return
	}
	if err := c.FirstErr(); err != nil {
		t.Errorf("take: %v", err)
	} else if c.Members[0].OK {
		acked.Add(1)
	}
	tr.done(c, o, false)
	c.Release()
}

// ackGranted adds each member's count to acked (indexed by its bucket
// through index) if every member of c was granted.
func ackGranted(c *Call, index map[BucketID]int, acked []atomic.Int64) {
	for m := range c.Members {
		if !c.Members[m].OK {
			return
		}
	}
	for m := range c.Members {
		acked[index[c.Items[c.Members[m].First].ID]].Add(int64(c.Members[m].Count))
	}
}
