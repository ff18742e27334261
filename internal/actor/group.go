package actor

import (
	"cmp"
	"context"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/seed7fbd42b6/ratelimit/internal/bucket"
)

// Group is the set of partitions of one limiter. Its methods are safe for
// concurrent use; Restore only before Start.
type Group struct {
	parts []*Partition
	clock func() int64
	spins int // see lock

	mu     sync.Mutex
	counts Counts // decisions made by coordinators (two-phase calls)

	stopOnce sync.Once
	stopped  chan struct{} // closed once Stop has stopped every partition
	final    Counts        // the partitions' own counts as they stopped (see sum)

	// besideHook, set by tests, runs in decideDenied once the other
	// partitions are loaded, before the call is decided.
	besideHook func()
	// lockHook, set by tests, runs in lock once its tries have failed,
	// before it waits for the mutex.
	lockHook func()
}

// NewGroup makes n partitions sharing log and clock (Unix nanoseconds).
func NewGroup(n int, log Log, clock func() int64) *Group {
	g := &Group{parts: make([]*Partition, n), clock: clock, spins: spinsFor(runtime.GOMAXPROCS(0)), stopped: make(chan struct{})}
	for i := range g.parts {
		g.parts[i] = newPartition(log, clock)
		g.parts[i].group = g
	}
	return g
}

// SetMaxBuckets bounds the buckets the group holds to n (0: no bound):
// the partitions share n as evenly as whole numbers allow (the first
// n%Partitions hold one more) and a message is refused when the new
// buckets it may write do not fit its partition's room (new buckets that
// two-phase calls hold count against it until their commit), so together
// they hold at most n, except for buckets restored above a share (Restore
// does not refuse). With n below the number of partitions, some
// partitions store none. Only before Start.
func (g *Group) SetMaxBuckets(n int) {
	for i, p := range g.parts {
		p.maxBuckets = math.MaxInt
		if n > 0 {
			p.maxBuckets = n / len(g.parts)
			if i < n%len(g.parts) {
				p.maxBuckets++
			}
		}
	}
}

// Start starts the partitions' goroutines.
func (g *Group) Start() {
	for _, p := range g.parts {
		go p.run()
	}
}

// Stop lets every partition finish the messages it has, then stops it.
// Messages sent afterwards fail with ErrClosed.
func (g *Group) Stop() {
	// Highest first: commits and aborts travel towards lower partitions,
	// so every partition still running can hear how its holds end.
	for i := len(g.parts) - 1; i >= 0; i-- {
		g.parts[i].stop()
	}
	g.stopOnce.Do(func() {
		// Their goroutines have exited: their own counters are read
		// directly, and no longer change.
		n := g.sum(func(i int, fn func(*Partition)) { fn(g.parts[i]) })
		g.mu.Lock()
		g.final = n
		g.mu.Unlock()
		close(g.stopped)
	})
}

// Partitions is the number of partitions.
func (g *Group) Partitions() int { return len(g.parts) }

// Close stops the partitions (see Stop); it returns nil.
func (g *Group) Close() error {
	g.Stop()
	return nil
}

// QueueOnly makes every message queue for the partitions' goroutines, as
// if no partition were ever idle: tests run the protocol on that path too
// (ACTOR_QUEUE_ONLY=1, here and in the ratelimit package), and
// BenchmarkRoundTrip measures it. Only before Start.
func (g *Group) QueueOnly() {
	for _, p := range g.parts {
		p.queue = true
	}
}

// Route returns the partition of shard of the bucket whose (name, key)
// hashes to hash (bucket.Hash): shard s sits on
// partition (hash + s/2) mod N, so shards 2k and 2k+1 form a pair on one
// partition and consecutive pairs sit on consecutive partitions. A
// request's two choices are a pair (see ratelimit's twoShards), decided by
// one partition in one step, and a hot limit's pairs spread over up to N
// partitions: with callers running idle partitions themselves, what
// serialises a hot limit is callers meeting on one partition, not the
// number of processors. Placement depends on (name, key, shard) alone, not
// on the limit's config, so recovery puts every bucket where requests
// look for it, even a bucket of an inline limit whose config it does not
// know.
func (g *Group) Route(hash uint64, shard uint32) int32 {
	return int32((hash + uint64(shard/2)) % uint64(len(g.parts)))
}

// Restore puts a recovered state (or deletion) of the bucket id into its
// partition. Only before Start.
func (g *Group) Restore(id BucketID, s bucket.State, lim *bucket.Limit, del bool) {
	nh := bucket.NameHash(id.Name)
	p := g.parts[g.Route(bucket.HashWith(nh, id.Key), id.Shard)]
	bh := bucket.ShardHash(bucket.TableHash(nh, id.Key), id.Shard)
	if del {
		p.buckets.del(bh, id)
		return
	}
	p.buckets.put(bh, entry{id: id, s: s, lim: lim})
}

// Decide decides c's members. Results are in c.Members, errors in the
// items (Call.ItemErr). A non-nil error means ctx ended first; abandoned
// reports that c now belongs to the partitions and must not be released.
func (g *Group) Decide(ctx context.Context, c *Call) (abandoned bool, err error) {
	if len(c.Items) == 0 {
		return false, nil
	}
	one := onePartition(c)
	if c.Atomic && len(c.Items) > 1 && !(one && distinct(c.Items)) {
		g.group(c) // order, and merge repeated buckets into one canonical item
	}
	if one {
		// Cancelable only if ctx can end: otherwise the partition need not
		// claim the call (a compare-and-swap on a line the caller wrote).
		c.cancel = ctx.Done() != nil
		c.oneMsg = true // one message, so one waiter at a time: c.w
		p := g.parts[c.Items[0].Part]
		c.spanNow = g.clock() // read before the partition's mutex, not under it
		ok := p.sendDecide(msg{call: c, kind: kindDecide, hi: int32(len(c.Items))})
		c.spanNow = 0
		if !ok {
			g.failAll(c)
			c.oneMsg = false
			return false, nil
		}
		if c.finished {
			c.finished = false
		} else {
			p.log.CommitNow() // a lone caller commits its own grant
			if err := c.wait(ctx); err != nil {
				return true, err
			}
		}
		c.oneMsg = false
		return false, nil
	}
	if !c.Atomic {
		g.group(c)
	}
	switch {
	case !c.Atomic: // members of one item each: decided where they live
		g.phase(c, kindDecide, c.ranges)
	case !writes(c):
		g.phase(c, kindPeek, c.ranges)
		if c.FirstErr() == nil {
			decideAll(c, g.clock())
		}
	case len(c.Members) == 1 && c.Members[0].Op == OpTake && c.Members[0].Second >= 0:
		g.twoChoices(c)
	default:
		if err := ctx.Err(); err != nil {
			return false, err
		}
		if c.decideHook != nil || !g.decideLocked(c) { // a test's hook may block: not under mutexes
			g.twoPhase(c)
		}
	}
	return false, nil
}

// twoPhase decides an atomic call over several partitions: the first
// partition holds its buckets and passes the call to the next, in
// partition order, and the last one decides and sends commit or abort back
// to the others (see Partition.chain). The caller only waits for the end.
func (g *Group) twoPhase(c *Call) {
	c.begin(len(c.ranges))
	r := c.ranges[0]
	if !g.parts[r.part].send(msg{call: c, kind: kindChain, k: 0, lo: r.lo, hi: r.hi}) {
		g.failAll(c)
		c.begin(1)
		c.partDone()
	}
	<-c.done
}

// Peek fills the states of c's items (as stored, or fresh), holding none,
// and sets c.Now to a clock reading taken after them.
func (g *Group) Peek(c *Call) {
	g.group(c)
	g.phase(c, kindPeek, c.ranges)
	c.Now = g.clock()
}

// Reset deletes c's items' buckets, durably.
func (g *Group) Reset(c *Call) {
	g.group(c)
	g.phase(c, kindReset, c.ranges)
}

// Run runs fn as partition i's executor (on its goroutine, or on the
// caller's if the partition is idle) and waits for it; false if the
// partition has stopped. fn must not wait on another partition. Before fn
// runs, the partition hands the log the records of every change fn can
// see.
func (g *Group) Run(i int, fn func(*Partition)) bool {
	c := NewCall()
	defer c.Release()
	c.fn = fn
	c.Items = append(c.Items, Item{}) // Run messages carry no bucket
	g.phase(c, kindRun, []span{{part: int32(i), lo: 0, hi: 0}})
	return c.Items[0].Err == nil
}

// phase sends kind for every span and waits for all of them.
func (g *Group) phase(c *Call, k kind, spans []span) {
	if len(spans) == 0 {
		return
	}
	if k == kindDecide && len(spans) > 1 {
		// One clock reading for every span this caller runs itself (a
		// span queued for a busy partition is decided in its batch, at
		// that batch's reading). Only send reads it, below.
		c.spanNow = g.clock()
	}
	c.begin(len(spans))
	for _, s := range spans {
		if !g.parts[s.part].send(msg{call: c, kind: k, lo: s.lo, hi: s.hi}) {
			for i := s.lo; i < s.hi; i++ {
				c.Items[i].Err = ErrClosed
			}
			if s.lo == s.hi {
				c.Items[0].Err = ErrClosed
			}
			c.partDone()
		}
	}
	c.spanNow = 0
	<-c.done
}

func (g *Group) failAll(c *Call) {
	for i := range c.Items {
		c.Items[i].Err = ErrClosed
	}
}

func onePartition(c *Call) bool {
	p := c.Items[0].Part
	for i := 1; i < len(c.Items); i++ {
		if c.Items[i].Part != p {
			return false
		}
	}
	return true
}

// distinct reports whether items name pairwise different buckets, checked
// for a few items only (more are reported as not distinct). An atomic call
// on one partition needs no grouping when it holds no bucket twice: its
// order matters only across partitions. This spares the common sharded
// request (two mates of one key) a sort.
func distinct(items []Item) bool {
	if len(items) > 4 {
		return false
	}
	for i := range items {
		for j := i + 1; j < len(items); j++ {
			if a, b := &items[i].ID, &items[j].ID; a.Shard == b.Shard && a.Key == b.Key && a.Name == b.Name {
				return false
			}
		}
	}
	return true
}

// group orders c's items by partition (and, for atomic calls, by bucket, so
// duplicates are adjacent and share one canonical item), then recomputes
// the members' item indexes and the per-partition spans.
func (g *Group) group(c *Call) {
	if c.Atomic {
		sortItems(c.Items)
	} else if !slices.IsSortedFunc(c.Items, func(a, b Item) int { return cmp.Compare(a.Part, b.Part) }) {
		g.countingSort(c)
	}
	c.ranges = c.ranges[:0]
	for i := range c.Items {
		it := &c.Items[i]
		it.canon = int32(i)
		if c.Atomic && i > 0 && c.Items[i-1].ID == it.ID {
			it.canon = c.Items[i-1].canon
		}
		switch {
		case it.member < 0: // a plain item (reads, resets)
		case it.second:
			c.Members[it.member].Second = int32(i)
		default:
			c.Members[it.member].First = int32(i)
		}
		if n := len(c.ranges); n == 0 || c.ranges[n-1].part != it.Part {
			c.ranges = append(c.ranges, span{part: it.Part, lo: int32(i), hi: int32(i)})
		}
		c.ranges[len(c.ranges)-1].hi = int32(i + 1)
	}
}

// sortItems orders items by partition, then bucket. The items of an
// atomic call are few, and an Item is two cache lines: they are compared
// in place and moved by insertion, not copied into every comparison.
func sortItems(items []Item) {
	if len(items) > 16 {
		slices.SortFunc(items, func(a, b Item) int { return compareItems(&a, &b) })
		return
	}
	for i := 1; i < len(items); i++ {
		for j := i; j > 0 && compareItems(&items[j-1], &items[j]) > 0; j-- {
			items[j-1], items[j] = items[j], items[j-1]
		}
	}
}

// compareItems orders items by partition, then bucket.
func compareItems(a, b *Item) int {
	return cmp.Or(cmp.Compare(a.Part, b.Part), strings.Compare(a.ID.Name, b.ID.Name),
		strings.Compare(a.ID.Key, b.ID.Key), cmp.Compare(a.ID.Shard, b.ID.Shard))
}

// countingSort orders c's items by partition, stably, in linear time.
func (g *Group) countingSort(c *Call) {
	var counts [256]int32
	var starts []int32
	if len(g.parts) < len(counts) { // starts has N+1 entries
		starts = counts[:len(g.parts)+1]
	} else {
		starts = make([]int32, len(g.parts)+1)
	}
	for i := range c.Items {
		starts[c.Items[i].Part+1]++
	}
	for p := 1; p < len(starts); p++ {
		starts[p] += starts[p-1]
	}
	c.scratch = append(c.scratch[:0], c.Items...)
	for _, it := range c.scratch {
		c.Items[starts[it.Part]] = it
		starts[it.Part]++
	}
	clear(c.scratch)
}
