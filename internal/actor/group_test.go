package actor

// The group (group.go): routing, grouping a call's items by partition,
// restoring buckets, one clock reading per call, and Stop with calls in
// flight.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/seed7fbd42b6/ratelimit/internal/bucket"
)

// Shard s of a bucket sits on partition (hash + s/2) mod N: shards 2k and
// 2k+1 share one, and a limit's pairs cover min(N, shards/2) partitions.
func TestRoutePairs(t *testing.T) {
	const n = 16
	g := NewGroup(n, NopLog{}, frozen)
	for h := range uint64(64) {
		if p := g.Route(h, 0); p != int32(h%n) {
			t.Fatalf("hash %d: shard 0 on %d, want %d", h, p, h%n)
		}
		for _, shards := range []uint32{2, 3, 16, 64} {
			parts := map[int32]bool{}
			for s := range shards {
				p := g.Route(h, s)
				parts[p] = true
				if q := g.Route(h, s^1); p != q {
					t.Fatalf("hash %d: shard %d on %d, its mate %d on %d", h, s, p, s^1, q)
				}
			}
			if want := min(n, int(shards+1)/2); len(parts) != want {
				t.Fatalf("hash %d: %d shards on %d partitions, want %d", h, shards, len(parts), want)
			}
		}
	}
}

// distinct finds a repeated bucket at any two positions, tells shards and
// names apart, and leaves calls of more than four items to group.
func TestDistinct(t *testing.T) {
	id := func(name, key string, shard uint32) Item {
		return Item{ID: BucketID{Name: name, Key: key, Shard: shard}}
	}
	a, b, c, d := id("n", "k", 0), id("n", "k", 1), id("n", "j", 0), id("m", "k", 0)
	for _, tc := range []struct {
		items []Item
		want  bool
	}{
		{[]Item{a}, true},
		{[]Item{a, b}, true},
		{[]Item{a, b, c, d}, true},
		{[]Item{a, a}, false},
		{[]Item{a, b, c, a}, false},
		{[]Item{b, c, d, d}, false},
		{[]Item{a, b, c, d, id("x", "y", 0)}, false}, // too many to compare: group them
	} {
		if got := distinct(tc.items); got != tc.want {
			t.Errorf("distinct(%v) = %v, want %v", tc.items, got, tc.want)
		}
	}
}

// With exactly 256 partitions (the default with a log, 8 x GOMAXPROCS, on a
// 32-processor machine), a non-atomic call whose items are not in
// partition order is grouped without overrunning countingSort's stack
// array of counters (it once panicked: 257 counters used in 256).
// Limiter.Value and Limiter.Reset of a sharded limit reach it whenever a
// key's shards wrap around partition N-1 to 0.
func TestCountingSort256Partitions(t *testing.T) {
	g := newGroup(t, 256, NopLog{}, frozen)
	lim := tokenLim(10)
	a := itemFor(g, lim, "n", keyOn(g, "n", 255, 0), 0)
	b := itemFor(g, lim, "n", keyOn(g, "n", 0, 0), 0)
	c := NewCall()
	defer c.Release()
	c.AddItem(a, -1, false)
	c.AddItem(b, -1, false)
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("Peek over partitions 255 and 0 of 256 panicked: %v", r)
			}
		}()
		g.Peek(c)
	}()
	if err := c.FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// The spans of an independent call (LimitMany) that its caller runs itself
// are decided at one clock reading, taken once for the call: a clock read
// costs about as much as a decision on this VM, and a call spans about one
// partition per four requests. With a clock that moves a second per
// reading, one reading per span would store four different times.
func TestManySpansShareOneClockReading(t *testing.T) {
	var reads atomic.Int64
	clock := func() int64 { return t0 + reads.Add(1)*int64(time.Second) }
	const n = 4
	g := NewGroup(n, NopLog{}, clock) // never started: every span runs inline
	lim := tokenLim(10)
	items := make([]Item, n)
	for p := range items {
		items[p] = itemFor(g, lim, "n", keyOn(g, "n", int32(p), 0), 0)
	}
	c := takeCall(1, items...)
	c.Atomic = false
	decide(t, g, c)
	if got := reads.Load(); got != 1 {
		t.Errorf("%d clock readings for one call over %d partitions, want 1", got, n)
	}
	var ts []int64
	for _, it := range items {
		g.Run(int(it.Part), func(p *Partition) {
			e, ok := p.buckets.get(it.Hash, it.ID)
			if !ok {
				t.Fatalf("%s: not stored after a take", it.ID.Key)
			}
			ts = append(ts, e.s.TS)
		})
	}
	for i := range ts {
		if ts[i] != ts[0] {
			t.Fatalf("stored times %v, want one time for the whole call", ts)
		}
	}
}

// Restore and later decisions agree on where a bucket is, and a restored
// deletion removes it.
func TestRestoreThenDecide(t *testing.T) {
	lim := tokenLim(10)
	g := testGroup(3, NopLog{}, frozen)
	x := itemFor(g, lim, "n", "x", 2)
	g.Restore(x.ID, st(4), lim, false)
	y := itemFor(g, lim, "n", "y", 0)
	g.Restore(y.ID, st(4), lim, false)
	g.Restore(y.ID, bucket.State{}, nil, true)
	g.Start()
	t.Cleanup(g.Stop)
	c := takeCall(1, x, y)
	decide(t, g, c)
	if c.Members[0].Left != 3 || c.Members[1].Left != 9 {
		t.Fatalf("after restore: %+v, want x 3 left, y 9 left", c.Members)
	}
	c.Release()
}

// The same through the partitions: two buckets on one partition whose
// Items carry the same Hash. Resetting one must not lose the other's debt.
func TestCollidingItemsThroughGroup(t *testing.T) {
	g := newGroup(t, 2, NopLog{}, frozen)
	lim := tokenLim(10)
	a := itemFor(g, lim, "n", "a", 0)
	b := a
	b.ID.Key = "b-forged-collision" // same Hash and Part, different id

	for _, it := range []Item{a, b} {
		c := takeCall(3, it)
		decide(t, g, c)
		if !c.Members[0].OK || c.Members[0].Left != 7 {
			t.Fatalf("first take on %v: %+v, want 7 left", it.ID, c.Members[0])
		}
		c.Release()
	}
	// One atomic call over both: each sees its own state.
	c := takeCall(1, a, b)
	decide(t, g, c)
	if c.Members[0].Left != 6 || c.Members[1].Left != 6 {
		t.Fatalf("atomic take over colliding buckets: %+v", c.Members)
	}
	c.Release()

	r := NewCall()
	r.AddItem(a, -1, false)
	g.Reset(r)
	r.Release()
	if v := value(t, g, a); v != 10 {
		t.Fatalf("a after reset = %v, want 10", v)
	}
	if v := value(t, g, b); v != 6 {
		t.Fatalf("b after resetting a = %v, want 6 (b's state lost: its tokens are minted again)", v)
	}
}

// XXH64's primes; collidingKey inverts XXH64 (seed 0) on inputs of fewer than
// 32 bytes, where it is a chain of bijections of the last 8-byte lane.
const (
	xxP1 uint64 = 11400714785074694791
	xxP2 uint64 = 14029467366897019727
	xxP3 uint64 = 1609587929392839161
	xxP4 uint64 = 9650029242287828579
	xxP5 uint64 = 2870177450012600261
)

// unxorshift inverts h ^= h >> s.
func unxorshift(h uint64, s uint) uint64 {
	x := h
	for i := uint(0); i < 64; i += s {
		x = h ^ x>>s
	}
	return x
}

// collidingKey is the key of len(prefix)+8 bytes (prefix a multiple of 8
// bytes, shorter than 24) starting with prefix whose xxhash64 is target:
// a key colliding with any other, so bucket.Hash collides too.
func collidingKey(prefix string, target uint64) string {
	n := uint64(len(prefix) + 8)
	lane := func(h, k uint64) uint64 {
		h ^= bits.RotateLeft64(k*xxP2, 31) * xxP1
		return bits.RotateLeft64(h, 27)*xxP1 + xxP4
	}
	h := xxP5 + n
	for i := 0; i < len(prefix); i += 8 {
		h = lane(h, binary.LittleEndian.Uint64([]byte(prefix[i:i+8])))
	}
	x := unxorshift(target, 32) * inverse(xxP3)
	x = unxorshift(x, 29) * inverse(xxP2)
	x = unxorshift(x, 33)
	x = bits.RotateLeft64((x-xxP4)*inverse(xxP1), -27) ^ h // the last lane's round
	k := bits.RotateLeft64(x*inverse(xxP1), -31) * inverse(xxP2)
	b := binary.LittleEndian.AppendUint64([]byte(prefix), k)
	return string(b)
}

func oneCall(op Op, count float64, it Item) *Call {
	c := NewCall()
	c.Atomic = true
	i := c.AddItem(it, 0, false)
	c.Members = append(c.Members, Member{Op: op, Count: count, First: i, Second: -1})
	return c
}

// Real collisions, not forged table hashes: keys whose bucket.Hash is one
// value (XXH64 is invertible on short keys, so anyone can make them). They
// share a partition (routing is by bucket.Hash) but not a table hash
// (TableHash is seeded per process), and go through takes, credits back
// to full (store deletes the bucket), resets, and a Sweep, against a model
// of every bucket's value.
func TestRealHashCollisionsThroughGroup(t *testing.T) {
	g := newGroup(t, 2, NopLog{}, frozen)
	lim := tokenLim(10)
	const name = "api"
	keys := []string{"victim", collidingKey("", xxhash.Sum64String("victim"))}
	for i := 0; len(keys) < 12; i++ {
		keys = append(keys, collidingKey(fmt.Sprintf("prefix%02d", i), xxhash.Sum64String("victim")))
	}
	items := make([]Item, len(keys))
	model := make([]float64, len(keys))
	for k, key := range keys {
		items[k] = itemFor(g, lim, name, key, 0)
		model[k] = 10
		if bucket.Hash(name, key) != bucket.Hash(name, keys[0]) || items[k].Part != items[0].Part {
			t.Fatalf("key %q: bucket hash %x part %d, want a collision with %x %d", key, bucket.Hash(name, key), items[k].Part, bucket.Hash(name, keys[0]), items[0].Part)
		}
		if k > 0 && items[k].Hash == items[0].Hash {
			t.Fatalf("key %q: table hash %x equals the victim's: TableHash is not seeded", key, items[k].Hash)
		}
	}
	checkAll := func(when string) {
		t.Helper()
		for k, it := range items {
			if v := value(t, g, it); v != model[k] {
				t.Fatalf("%s: key #%d = %v, model %v", when, k, v, model[k])
			}
		}
	}
	r := rand.New(rand.NewPCG(121, 122))
	for op := 0; op < 300; op++ {
		k := r.IntN(len(keys))
		count := float64(1 + r.IntN(4))
		switch r.IntN(5) {
		case 0, 1, 2:
			c := oneCall(OpTake, count, items[k])
			decide(t, g, c)
			if ok := model[k] >= count; c.Members[0].OK != ok {
				t.Fatalf("op %d: take %v of #%d (model %v): OK %v", op, count, k, model[k], c.Members[0].OK)
			} else if ok {
				model[k] -= count
			}
			c.Release()
		case 3:
			c := oneCall(OpCredit, count, items[k])
			decide(t, g, c)
			model[k] = min(10, model[k]+count)
			c.Release()
		case 4:
			c := NewCall()
			c.AddItem(items[k], -1, false)
			g.Reset(c)
			c.Release()
			model[k] = 10
		}
		if op%25 == 0 {
			checkAll(fmt.Sprintf("op %d", op))
		}
	}
	checkAll("end")
	// The partition's table holds exactly the buckets that are not full.
	m := tableModel{}
	for k, it := range items {
		if model[k] < 10 {
			m[it.ID] = modelVal{h: it.Hash, v: model[k]}
		}
	}
	var err error
	g.Run(int(items[0].Part), func(p *Partition) { err = tableErr(&p.buckets, m) })
	if err != nil {
		t.Fatal(err)
	}
	// Sweep visits exactly the buckets that are not full, once each.
	want := 0
	for _, v := range model {
		if v < 10 {
			want++
		}
	}
	var visited, left int
	seen := map[BucketID]int{}
	g.Run(int(items[0].Part), func(p *Partition) {
		p.Sweep(t0, func(id BucketID, s bucket.State) {
			if id.Name == name {
				visited++
				seen[id]++
			}
		})
		left = p.Len()
	})
	if visited != want || len(seen) != want || left != want {
		t.Fatalf("Sweep visited %d (%d distinct), Len %d; want %d", visited, len(seen), left, want)
	}
	checkAll("after sweep")
}

// After Stop, every kind of call returns at once with ErrClosed.
func TestCallsAfterStop(t *testing.T) {
	g := NewGroup(3, NopLog{}, frozen)
	g.Start()
	lim := tokenLim(10)
	x := itemFor(g, lim, "n", keyOn(g, "n", 0, 0), 0)
	y := itemFor(g, lim, "n", keyOn(g, "n", 1, 0), 0)
	z := itemFor(g, lim, "n", keyOn(g, "n", 2, 0), 0)
	g.Stop()
	g.Stop() // twice is fine

	done := async(func() {
		for _, c := range []*Call{takeCall(1, x), takeCall(1, x, y, z), twoCall(1, false, x, y)} {
			if _, err := g.Decide(context.Background(), c); err != nil {
				t.Errorf("Decide after Stop: %v", err)
			}
			if !errors.Is(c.FirstErr(), ErrClosed) {
				t.Errorf("Decide over %d items after Stop: FirstErr %v, want ErrClosed", len(c.Items), c.FirstErr())
			}
			c.Release()
		}
		for _, f := range []func(*Call){g.Peek, g.Reset} {
			c := NewCall()
			c.AddItem(x, -1, false)
			c.AddItem(y, -1, false)
			f(c)
			if !errors.Is(c.FirstErr(), ErrClosed) {
				t.Errorf("Peek/Reset after Stop: %v", c.FirstErr())
			}
			c.Release()
		}
		if g.Run(0, func(*Partition) { t.Error("Run ran on a stopped partition") }) {
			t.Error("Run on a stopped partition reported true")
		}
		g.Counts()
	})
	waitChan(t, done, "calls on a stopped group")
}

// Stop while a chain holds buckets on a partition that is stopped before
// the chain's last partition decides: the caller must not both be told
// ErrClosed and have had its tokens consumed ("an error consumes
// nothing"), and the call must stay all-or-nothing. (A chain's commit
// travels towards lower partitions: had Stop stopped them in increasing
// order, the last partition would commit its own part, find the earlier
// one stopped, and report ErrClosed for a call it half committed.)
func TestStopMidChainIsAllOrNothing(t *testing.T) {
	fl := &fakeLog{}
	g := testGroup(2, fl, frozen)
	g.Start()
	lim := tokenLim(10)
	x, y := twoParts(g, lim)

	unblock := blockPartition(t, g, 1)
	c := takeCall(1, x, y)
	cDone := async(func() { decide(t, g, c) })
	waitUntil(t, "the chain to hold x and reach partition 1", func() bool { return inbox(g.parts[1]) == 1 })
	stopDone := async(g.Stop)
	// Whatever order Stop takes, by the time partition 1 is told to stop
	// the partitions it stops first are done.
	waitUntil(t, "Stop to reach partition 1", func() bool { return stopped(g.parts[1]) })
	unblock()
	waitChan(t, cDone, "the chain's caller")
	waitChan(t, stopDone, "Stop")

	// Partitions have exited: their maps can be read directly.
	_, xStored := g.parts[0].buckets.get(x.Hash, x.ID)
	_, yStored := g.parts[1].buckets.get(y.Hash, y.ID)
	err := c.FirstErr()
	t.Logf("caller: err=%v members=%+v; x stored %v, y stored %v; log %+v", err, c.Members, xStored, yStored, fl.records())
	if xStored != yStored {
		t.Errorf("half-committed chain: x stored %v, y stored %v", xStored, yStored)
	}
	if err != nil && (xStored || yStored || len(fl.records()) > 0) {
		t.Errorf("caller told %v, but its grant was stored/logged", err)
	}
}

// Stop while callers of every kind are in flight (single takes, chains,
// parked messages, two-choice takes, checks, resets, peeks, counters):
// every caller returns, items of calls that could not run carry ErrClosed,
// and no bucket went below zero.
func TestStopWithCallsInFlight(t *testing.T) {
	for round := 0; round < 5; round++ {
		stopInFlight(t, uint64(round))
	}
}

func stopInFlight(t *testing.T, seed uint64) {
	const (
		parts   = 4
		workers = 40
		capac   = 300
	)
	g := testGroup(parts, NopLog{}, frozen)
	g.Start()
	lim := tokenLim(capac)
	var items []Item
	for p := int32(0); p < parts; p++ {
		for i := 0; i < 2; i++ {
			items = append(items, itemFor(g, lim, "n", keyOn(g, "n", p, i), 0))
		}
	}
	index := make(map[BucketID]int)
	for i, it := range items {
		index[it.ID] = i
	}
	acked := make([]atomic.Int64, len(items))
	var ops atomic.Int64
	var stop atomic.Bool
	started := make(chan struct{})
	var startOnce sync.Once
	done := spawn(workers, seed*1000, 5, func(r *rand.Rand) {
		for !stop.Load() {
			if ops.Add(1) == 2000 {
				startOnce.Do(func() { close(started) })
			}
			pick := func() Item { return items[r.IntN(len(items))] }
			switch op := r.IntN(8); op {
			case 0, 1, 2: // chains (and one-partition atomics)
				c := takeCall(1, pick(), pick(), pick())
				decide(t, g, c)
				account(t, c, index, acked)
				c.Release()
			case 3:
				c := takeCall(1, pick())
				if decideCancelable(t, g, c, 1+r.IntN(2)) {
					continue
				}
				account(t, c, index, acked)
				c.Release()
			case 4:
				a, b := pick(), pick()
				if a.ID == b.ID {
					continue
				}
				c := twoCall(1, false, a, b)
				decide(t, g, c)
				if err := c.FirstErr(); err != nil && !errors.Is(err, ErrClosed) {
					t.Errorf("two-choice error: %v", err)
				}
				c.Release()
			case 5:
				c := NewCall()
				c.AddItem(pick(), -1, false)
				c.AddItem(pick(), -1, false)
				g.Peek(c)
				c.Release()
			case 6:
				c := takeCall(1, pick(), pick())
				c.Members[0].Op, c.Members[1].Op = OpCheck, OpCheck
				decide(t, g, c)
				c.Release()
			case 7:
				g.Counts()
			}
		}
	})
	waitChan(t, started, "the workers to get going")
	waitChan(t, async(g.Stop), "Stop with calls in flight")
	stop.Store(true)
	waitChan(t, done, "every caller to return after Stop")
	for k, it := range items {
		p := g.parts[it.Part] // exited: read directly
		v := float64(capac)
		if e, ok := p.buckets.get(it.Hash, it.ID); ok {
			v = e.s.Value
		}
		if v < 0 {
			t.Errorf("bucket %v over-admitted: %v", it.ID, v)
		}
		if capac-v < float64(acked[k].Load()) {
			t.Errorf("bucket %v lost %v tokens but %v were acknowledged", it.ID, capac-v, acked[k].Load())
		}
	}
}

// account adds an atomic take's acknowledged tokens per bucket.
func account(t *testing.T, c *Call, index map[BucketID]int, acked []atomic.Int64) {
	if err := c.FirstErr(); err != nil {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("unexpected error: %v", err)
		}
		return
	}
	ackGranted(c, index, acked)
}
