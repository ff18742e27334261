package actor

// Helpers shared by the package's tests: groups and items placed on chosen
// partitions, calls, fake logs, waits that report hangs instead of
// sleeping, a tracker of Call reuse, and a model of the bucket table.
// Times are plain int64 nanoseconds; the frozen clock reads t0.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
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
	owned    int           // AppendOwn calls
	ownOpen  bool          // an AppendOwn has had no CommitNow yet
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

func (l *fakeLog) AppendOwn(recs []wal.Record, w wal.Waiter) {
	l.mu.Lock()
	l.owned++
	l.ownOpen = true
	l.mu.Unlock()
	l.Append(recs, w)
}

// ownState is how many AppendOwn calls there were and whether the last
// has had no CommitNow yet.
func (l *fakeLog) ownState() (owned int, open bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.owned, l.ownOpen
}

func (l *fakeLog) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

func (l *fakeLog) CommitNow() {
	l.mu.Lock()
	l.ownOpen = false
	l.mu.Unlock()
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
	return Item{
		ID:   BucketID{Name: name, Key: key, Shard: shard},
		Hash: bucket.ShardHash(bucket.TableHash(bucket.NameHash(name), key), shard),
		Lim:  lim,
		Part: g.Route(bucket.Hash(name, key), shard),
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

// stopped reports whether partition p has begun to stop.
func stopped(p *Partition) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stopped
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

// asyncLog commits on its own goroutine, one waiter at a time, in order.
type asyncLog struct{ ch chan wal.Waiter }

func newAsyncLog(t testing.TB) *asyncLog {
	l := &asyncLog{ch: make(chan wal.Waiter, 1024)}
	done := async(func() {
		for w := range l.ch {
			w.Committed(nil)
		}
	})
	t.Cleanup(func() { close(l.ch); <-done })
	return l
}

func (l *asyncLog) Append(_ []wal.Record, w wal.Waiter) { l.ch <- w }

func (l *asyncLog) AppendOwn(recs []wal.Record, w wal.Waiter) { l.Append(recs, w) }
func (l *asyncLog) Err() error                                { return nil }
func (l *asyncLog) CommitNow()                                {}

// twoParts returns buckets x on partition 0 and y on partition 1.
func twoParts(g *Group, lim *bucket.Limit) (x, y Item) {
	return itemFor(g, lim, "n", keyOn(g, "n", 0, 0), 0), itemFor(g, lim, "n", keyOn(g, "n", 1, 0), 0)
}

// collidingIDs are n distinct bucket ids given one shared table hash h
// (a real 64-bit collision cannot be found, so the test forges one).
func collidingIDs(n int) (h uint64, ids []BucketID) {
	for i := 0; i < n; i++ {
		ids = append(ids, BucketID{Name: "n", Key: fmt.Sprintf("c%d", i)})
	}
	return 0xC011_1DE5_C011_1DE5, ids
}

func st(v float64) bucket.State { return bucket.State{Value: v, TS: t0} }

func mustGet(t *testing.T, tb *table, h uint64, id BucketID, want float64) {
	t.Helper()
	e, ok := tb.get(h, id)
	if !ok {
		t.Fatalf("get(%v): missing, want value %v", id, want)
	}
	if e.id != id || e.s.Value != want {
		t.Fatalf("get(%v) = %+v, want value %v", id, e, want)
	}
}

func mustMiss(t *testing.T, tb *table, h uint64, id BucketID) {
	t.Helper()
	if e, ok := tb.get(h, id); ok {
		t.Fatalf("get(%v) = %+v, want missing", id, e)
	}
}

// inverse is the inverse of the odd c modulo 2^64 (Newton's iteration; c is
// its own inverse to 3 bits, and each step doubles the correct bits).
func inverse(c uint64) uint64 {
	x := c
	for i := 0; i < 6; i++ {
		x *= 2 - c*x
	}
	return x
}

// unmixTag inverts the finalizer of table.tag (before its |1).
func unmixTag(x uint64) uint64 {
	x ^= x >> 33 // a xorshift by >= 32 is its own inverse
	x *= inverse(0xc4ceb9fe1a85ec53)
	x ^= x >> 33
	x *= inverse(0xff51afd7ed558ccd)
	x ^= x >> 33
	return x
}

// forgeHash is a table hash whose tag in tb is tag|1. The hashes of alt false
// and true differ and share that tag (the |1 collision).
func forgeHash(tb *table, tag uint64, alt bool) uint64 {
	m := tag | 1
	if alt {
		m &^= 1
	}
	return unmixTag(m) ^ tb.seed
}

// forgeTag is a tag whose top prefixBits bits are prefix, whose home bits
// (1..12: the home slot in a subtable of any size, masked) are home, and
// whose other bits come from r.
func forgeTag(r *rand.Rand, prefix uint64, prefixBits int, home uint64) uint64 {
	x := r.Uint64()
	if prefixBits > 0 {
		x = x&(^uint64(0)>>prefixBits) | prefix<<(64-prefixBits)
	}
	x = x&^(uint64(0xFFF)<<1) | (home&0xFFF)<<1
	return x | 1
}

// modelVal is the model of one bucket: the hash its caller uses, its value,
// and whether its limit is unknown (nil: never full).
type modelVal struct {
	h       uint64
	v       float64
	unknown bool
}

type tableModel map[BucketID]modelVal

func (v modelVal) full() bool { return !v.unknown && v.v >= 10 }

var modelLim = tokenLim(10) // full at 10 under the frozen clock

func modelID(prefix string, k int) BucketID {
	return BucketID{Name: "m", Key: fmt.Sprintf("%s%d", prefix, k)}
}

// modelPut stores (id, v) in tb and in the model.
func modelPut(tb *table, m tableModel, id BucketID, h uint64, v float64, unknown bool) {
	e := entry{id: id, s: st(v), lim: modelLim}
	if unknown {
		e.lim = nil
	}
	tb.put(h, e)
	m[id] = modelVal{h: h, v: v, unknown: unknown}
}

// modelDel deletes id, present in the model, from tb and the model.
func modelDel(tb *table, m tableModel, id BucketID) {
	tb.del(m[id].h, id)
	delete(m, id)
}

// checkTable checks tb's invariants and that it holds exactly the model:
//   - the directory has 2^global slots, and every subtable of depth d fills
//     one aligned range of 2^(global-d) of them, and no other;
//   - every subtable has a power-of-two size in [minSlots, maxSlots], a
//     correct n, a load of at most 3/4, cleared empty slots;
//   - every tag is odd, lies in its subtable's directory range, is unique,
//     and is reachable: no empty slot between its home and its slot;
//   - the entries are exactly the model's (id, tag of its hash, value,
//     limit), each once, in main or in overflow; every overflow entry's tag
//     is held in main by another id; t.n and len() are right;
//   - get finds every entry.
func checkTable(t *testing.T, tb *table, m tableModel) {
	t.Helper()
	if err := tableErr(tb, m); err != nil {
		t.Fatal(err)
	}
	for id, v := range m {
		e, ok := tb.get(v.h, id)
		if !ok || e.id != id || e.s.Value != v.v || (e.lim == nil) != v.unknown {
			t.Fatalf("get(%v) = %+v %v, model %+v", id, e, ok, v)
		}
	}
}

func tableErr(tb *table, m tableModel) error {
	global := 64 - int(tb.shift)
	if global < 0 || global > 30 || len(tb.dir) != 1<<global {
		return fmt.Errorf("directory of %d for shift %d", len(tb.dir), tb.shift)
	}
	if tb.cursor < 0 || tb.cursor > len(tb.dir) {
		return fmt.Errorf("cursor %d outside directory of %d", tb.cursor, len(tb.dir))
	}
	if c := tb.cursor; c < len(tb.dir) && c%(1<<(global-tb.dir[c].depth)) != 0 {
		return fmt.Errorf("cursor %d inside the range of a subtable of depth %d", c, tb.dir[c].depth)
	}
	seen := map[BucketID]bool{}
	mainTag := map[uint64]BucketID{}
	subs := map[*subtable]bool{}
	total := 0
	for j := 0; j < len(tb.dir); {
		s := tb.dir[j]
		if s == nil || s.depth < 0 || s.depth > global {
			return fmt.Errorf("dir[%d]: bad subtable", j)
		}
		if subs[s] {
			return fmt.Errorf("dir[%d]: subtable already seen in another range", j)
		}
		subs[s] = true
		width := 1 << (global - s.depth)
		if j%width != 0 {
			return fmt.Errorf("dir[%d]: range of depth %d not aligned", j, s.depth)
		}
		for k := j; k < j+width; k++ {
			if tb.dir[k] != s {
				return fmt.Errorf("dir[%d] differs from dir[%d] within a range of depth %d", k, j, s.depth)
			}
		}
		size := len(s.tags)
		if size < minSlots || size > maxSlots || size&(size-1) != 0 || len(s.ents) != size {
			return fmt.Errorf("dir[%d]: %d slots, %d entries", j, size, len(s.ents))
		}
		cnt := 0
		for i, tg := range s.tags {
			if tg == 0 {
				if s.ents[i] != (entry{}) {
					return fmt.Errorf("dir[%d] slot %d: empty slot holds %+v", j, i, s.ents[i])
				}
				continue
			}
			cnt++
			if tg&1 == 0 {
				return fmt.Errorf("even tag %x", tg)
			}
			if k := int(tg >> tb.shift); global > 0 && (k < j || k >= j+width) {
				return fmt.Errorf("tag %x (dir index %d) in the subtable of [%d,%d)", tg, k, j, j+width)
			}
			for p := s.home(tg); p != i; p = (p + 1) & (size - 1) {
				if s.tags[p] == 0 {
					return fmt.Errorf("tag %x at slot %d unreachable: empty slot %d after its home %d", tg, i, p, s.home(tg))
				}
			}
			if _, dup := mainTag[tg]; dup {
				return fmt.Errorf("tag %x twice", tg)
			}
			e := &s.ents[i]
			mainTag[tg] = e.id
			v, ok := m[e.id]
			switch {
			case !ok:
				return fmt.Errorf("%v in the table, not in the model", e.id)
			case seen[e.id]:
				return fmt.Errorf("%v twice", e.id)
			case tb.tag(v.h) != tg:
				return fmt.Errorf("%v under tag %x, its hash's tag is %x", e.id, tg, tb.tag(v.h))
			case e.s.Value != v.v || (e.lim == nil) != v.unknown:
				return fmt.Errorf("%v = %+v, model %+v", e.id, *e, v)
			}
			seen[e.id] = true
		}
		if cnt != s.n {
			return fmt.Errorf("dir[%d]: n %d, counted %d", j, s.n, cnt)
		}
		if 4*cnt > 3*size {
			return fmt.Errorf("dir[%d]: %d entries in %d slots", j, cnt, size)
		}
		total += cnt
		j += width
	}
	if total != tb.n {
		return fmt.Errorf("t.n %d, counted %d", tb.n, total)
	}
	for id, o := range tb.overflow {
		v, ok := m[id]
		switch {
		case !ok:
			return fmt.Errorf("%v in overflow, not in the model", id)
		case seen[id]:
			return fmt.Errorf("%v in main and overflow", id)
		case o.e.id != id || o.h != v.h || o.e.s.Value != v.v || (o.e.lim == nil) != v.unknown:
			return fmt.Errorf("overflow %v = %+v, model %+v", id, o, v)
		}
		if owner, ok := mainTag[tb.tag(o.h)]; !ok || owner == id {
			return fmt.Errorf("overflow %v: its tag %x is not held in main by another id", id, tb.tag(o.h))
		}
		seen[id] = true
	}
	if len(seen) != len(m) || tb.len() != len(m) {
		return fmt.Errorf("table holds %d (len %d), model %d", len(seen), tb.len(), len(m))
	}
	return nil
}

// checkSweep runs Sweep on tb and checks it against the model: it visits each
// entry that is not full exactly once, drops exactly the full ones, and
// the model loses them too.
func checkSweep(t *testing.T, tb *table, m tableModel) {
	t.Helper()
	p := &Partition{buckets: *tb}
	visits := map[BucketID]int{}
	dropped := p.Sweep(t0, func(id BucketID, s bucket.State) {
		visits[id]++
		if v, ok := m[id]; !ok || v.v != s.Value {
			t.Fatalf("Sweep visited %v = %v, model %+v %v", id, s.Value, v, ok)
		}
	})
	*tb = p.buckets
	full := 0
	for id, v := range m {
		if v.full() {
			full++
			if visits[id] != 0 {
				t.Fatalf("full %v visited", id)
			}
			if _, ok := tb.get(v.h, id); ok {
				t.Fatalf("full %v kept by Sweep", id)
			}
			delete(m, id)
		} else if visits[id] != 1 {
			t.Fatalf("%v visited %d times", id, visits[id])
		}
	}
	if dropped != full {
		t.Fatalf("Sweep dropped %d, want %d", dropped, full)
	}
	if len(visits) != len(m) {
		t.Fatalf("Sweep visited %d buckets, want %d", len(visits), len(m))
	}
}

// dropFull removes the full buckets from m (what a sweep drops) and
// returns how many there were.
func dropFull(m tableModel) int {
	full := 0
	for id, v := range m {
		if v.full() {
			full++
			delete(m, id)
		}
	}
	return full
}

// pruneSwept removes from the model the full buckets the table no longer
// holds (a partial sweep dropped them), failing on a bucket that is not
// full and missing, and returns the model.
func pruneSwept(t *testing.T, tb *table, m tableModel) tableModel {
	t.Helper()
	for id, v := range m {
		if _, ok := tb.get(v.h, id); !ok {
			if !v.full() {
				t.Fatalf("%v (value %v, not full) lost", id, v.v)
			}
			delete(m, id)
		}
	}
	return m
}

// mixedLims are a token bucket, a reservable one and a reservable fixed
// window, for streams that must cover every kind.
func mixedLims() []*bucket.Limit {
	return []*bucket.Limit{
		{Kind: bucket.TokenBucket, Rate: 10, Period: int64(time.Second), Capacity: 5},
		{Kind: bucket.TokenBucket, Rate: 3, Period: int64(time.Second), Capacity: 3, MaxReserved: 4},
		{Kind: bucket.FixedWindow, Rate: 4, Period: int64(time.Second), Capacity: 4, MaxReserved: 2},
	}
}

// logModes are the two kinds of log a group runs on: none (memory mode),
// and a log that commits at once and keeps every record (durable mode).
var logModes = []struct {
	name string
	log  func() Log
}{
	{"memory", func() Log { return NopLog{} }},
	{"log", func() Log { return &fakeLog{} }},
}

// aloneAndCalled are two groups of n partitions on clock, each on a log
// newLog makes: alone (never QueueOnly, so that DecideAlone decides) and
// called (as ACTOR_QUEUE_ONLY says), to decide the same stream alone and
// by call.
func aloneAndCalled(t testing.TB, n int, clock func() int64, newLog func() Log) (alone, called *Group) {
	alone = NewGroup(n, newLog(), clock)
	alone.Start()
	t.Cleanup(alone.Stop)
	return alone, newGroup(t, n, newLog(), clock)
}

// sameRecords fails unless groups a and b, on fakeLogs, logged the same
// records for every bucket, in the same order (the order of records of
// different buckets may differ: a call over two partitions logs its
// parts from either). On other logs it checks nothing.
func sameRecords(t testing.TB, a, b *Group) {
	t.Helper()
	la, oka := a.parts[0].log.(*fakeLog)
	lb, okb := b.parts[0].log.(*fakeLog)
	if !oka || !okb {
		return
	}
	byBucket := func(recs []wal.Record) map[BucketID][]wal.Record {
		m := make(map[BucketID][]wal.Record)
		for _, r := range recs {
			id := BucketID{Name: r.Name, Key: r.Key, Shard: r.Shard}
			m[id] = append(m[id], r)
		}
		return m
	}
	ra, rb := la.records(), lb.records()
	if len(ra) == 0 {
		t.Error("nothing was logged: the stream wrote no bucket")
	}
	ma, mb := byBucket(ra), byBucket(rb)
	for id, want := range mb {
		if got := ma[id]; !slices.Equal(got, want) {
			t.Errorf("bucket %v: alone logged %d records, by call %d (first difference in %+v against %+v)", id, len(got), len(want), got, want)
		}
	}
	for id, got := range ma {
		if _, ok := mb[id]; !ok {
			t.Errorf("bucket %v: alone logged %+v, by call nothing", id, got)
		}
	}
}

// byCall decides mem, a member of the one bucket it, as a one-member
// atomic call on g, and returns the member as decided (First 0).
func byCall(t testing.TB, g *Group, it Item, mem Member) Member {
	t.Helper()
	c := NewCall()
	c.Atomic = true
	mem.First = c.AddItem(it, 0, false)
	c.Members = append(c.Members, mem)
	decide(t, g, c)
	mem = c.Members[0]
	mem.First = 0
	c.Release()
	return mem
}

// sameStates fails unless every bucket of items is stored alike, or
// absent from both, in groups a and b.
func sameStates(t testing.TB, a, b *Group, items []Item) {
	t.Helper()
	for _, it := range items {
		sa, oka := state(t, a, it)
		sb, okb := state(t, b, it)
		if sa != sb || oka != okb {
			t.Errorf("%+v: stored %v %v in one group, %v %v in the other", it.ID, sa, oka, sb, okb)
		}
	}
}

// sameEnd checks that groups a and b, fed the same stream, made the same
// decisions (Counts) and hold the same bucket of every key under every
// limit (the limits named "p", "q", ... in order, as the streams name
// them).
func sameEnd(t testing.TB, a, b *Group, lims []*bucket.Limit, keys []string) {
	t.Helper()
	if ca, cb := a.Counts(), b.Counts(); ca != cb {
		t.Errorf("counts %+v in one group, %+v in the other", ca, cb)
	}
	var items []Item
	for li, lim := range lims {
		for _, key := range keys {
			items = append(items, itemFor(a, lim, string(rune('p'+li)), key, 0))
		}
	}
	sameStates(t, a, b, items)
}

// deniedHot is a started group of two partitions on the frozen clock,
// with a bucket of one token on each (hot, user) and hot's denial
// published.
func deniedHot(t *testing.T) (g *Group, hot, user Item) {
	t.Helper()
	g = NewGroup(2, NopLog{}, frozen)
	g.Start()
	t.Cleanup(g.Stop)
	hot, user = twoParts(g, tokenLim(1))
	publishDenial(t, g, hot)
	return g, hot, user
}

// publishDenial takes one token from it's bucket (capacity 1, frozen
// clock) and then asks again until the denial is published, failing if
// any answer is not what that bucket gives.
func publishDenial(t testing.TB, g *Group, it Item) {
	t.Helper()
	for i := range publishAfter + 1 {
		x, m := it, Member{Op: OpTake, Count: 1, Second: -1}
		if !decideAlone(g, &x, &m) || m.OK != (i == 0) {
			t.Fatalf("take %d of %+v: OK %v", i, it.ID, m.OK)
		}
	}
	if !g.parts[it.Part].denials.holds(&it) {
		t.Fatalf("the denials of %+v were not published", it.ID)
	}
}

// decideAlone decides m as Limit does a lone request: from a published
// denial (Group.RepeatDenial), else by Group.DecideAlone with a context
// that never ends, so that its only answer is whether it decided.
func decideAlone(g *Group, it *Item, m *Member) bool {
	now, denied := g.RepeatDenial(it, m)
	if denied {
		return true
	}
	done, _ := g.DecideAlone(context.Background(), it, m, now)
	return done
}

// get is the table's whole entry for bucket id (table hash h), as tests
// inspect it; the partitions read states only (table.getRef).
func (t *table) get(h uint64, id BucketID) (entry, bool) {
	_, ref, ok := t.getRef(h, id)
	switch {
	case ref != nil:
		return *ref, true
	case ok:
		return t.overflow[id].e, true
	}
	return entry{}, false
}
