package actor

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/seed7fbd42b6/ratelimit/internal/bucket"
)

// ErrClosed is set on the items of a message a stopped partition could not
// take.
var ErrClosed = errors.New("actor: partition stopped")

// ErrFull is set on the items of a message that needs buckets its
// partition does not hold, more than the partition has room for under its
// most buckets (Group.SetMaxBuckets).
var ErrFull = errors.New("actor: partition holds its most buckets")

// BucketID names one bucket.
type BucketID struct {
	Name, Key string
	Shard     uint32
}

// Op is what a member asks of its buckets.
type Op uint8

const (
	OpTake   Op = iota // take Count tokens (grant or deny)
	OpCheck            // decide as OpTake, write nothing
	OpCredit           // give Count tokens back, capped at capacity
)

// Item is one bucket a call touches. Fields are ordered to pack (112
// bytes; a LimitMany call of 64 requests carries 64 items and members).
type Item struct {
	ID   BucketID
	Hash uint64 // bucket.ShardHash(bucket.TableHash(bucket.NameHash(Name), Key), Shard)
	Lim  *bucket.Limit
	// Gen is the generation of the limits Lim belongs to (see
	// Partition.Relimit): a store of an older one keeps the bucket under
	// the limit that replaced it.
	Gen   uint64
	Phase int64 // fixed-window phase

	State bucket.State // loaded or prepared state, updated by grants
	Err   error        // why this item could not be decided or stored

	// ref is where loadItem found the bucket in its partition's table (nil
	// when absent, or an overflow entry's copy), valid while the table's
	// moves equals refMoves (see table.getRef).
	ref      *entry
	refMoves uint64

	Part    int32 // owning partition
	member  int32 // index of the member this item serves
	canon   int32 // index of the first item with the same ID (atomic calls)
	second  bool  // the member's B item
	heldNew bool  // counted in its partition's heldNew (see Partition.load)
	wrote   bool
	Write   bool // State is to be stored
}

// Member is one decision of a call (64 bytes: one cache line).
type Member struct {
	Count float64
	// Def is the caller's description of the member's limit (package
	// ratelimit's *limitDef); stores do not touch it.
	Def any
	// First and Second index the member's items in Call.Items: Second is
	// the other shard of a two-choice pair, < 0 for one bucket.
	First, Second int32
	Op            Op
	Reserve       bool

	OK         bool
	RetryAfter int64
	// Left is the tokens left after the decision in its bucket(s),
	// summed; for OpCredit, the part of Count the bucket's capacity
	// refused (see Spill).
	Left      float64
	UntilFull int64 // how long those buckets need to refill (their average, for two)
	// InWait: the member is one RepeatsWait replayed, so Call.Wait counts
	// it, and its own RetryAfter (from the state the members before it
	// left at the decision's reading) is not the call's.
	InWait bool
}

// Spill is, for a decided OpCredit member, the part of its Count the
// bucket's capacity refused.
func (m *Member) Spill() float64 { return m.Left }

// Call is one caller's request; see the package doc. Calls are pooled: get
// them with NewCall and return them with Release.
type Call struct {
	Items   []Item
	Members []Member
	// Atomic: grant every member or none. Otherwise members are decided
	// independently, in order, each where its bucket lives, so each must
	// have exactly one item.
	Atomic bool
	// Now is the clock reading the items' States are current at, set by
	// Group.Peek.
	Now int64
	// Wait is set, for a denied atomic call whose members name one bucket
	// more than once, to the earliest wait after which the members it
	// replayed (Member.InWait) are granted (see RepeatsWait); 0 otherwise.
	Wait int64

	fn      func(*Partition) // for Run
	ranges  []span
	spanNow int64 // a clock reading for the spans the caller runs itself; 0: none
	scratch []Item
	// decideHook, set by tests, replaces decideAll for an atomic call (to
	// pause a chain in its last step).
	decideHook func(c *Call, now int64) bool
	done       chan struct{}
	remaining  atomic.Int32
	state      atomic.Int32
	cancel     bool // a single-message call: may be abandoned
	oneMsg     bool // sent as one message: its waiter is w (see msgWaiter)
	w          msgWaiter
	uncounted  bool          // a step of another call: not a decision of its own
	held       *atomic.Int64 // see Hold
	// inline: the caller runs this call's only message itself, in memory
	// mode, so its end needs no signal; finished: it ended that way.
	// Both are the caller's goroutine's (see Partition.send).
	inline, finished bool
}

type span struct{ part, lo, hi int32 }

const (
	stateQueued int32 = iota
	stateClaimed
	stateDone
	stateAbandoned
)

// callBlock is how a pooled call is allocated: with room for one member
// and two items (a single Limit, sharded or not) in the same allocation,
// so that a call, its items and its member sit on neighbouring cache lines
// as they travel between the caller's core and the partition's.
type callBlock struct {
	c      Call
	member [1]Member
	item   [2]Item
}

var callPool = sync.Pool{New: func() any {
	b := &callBlock{}
	b.c.done = make(chan struct{}, 1)
	b.c.Items, b.c.Members = b.item[:0], b.member[:0]
	return &b.c
}}

// NewCall returns an empty call.
func NewCall() *Call { return callPool.Get().(*Call) }

// States copies the states of c's items, in item order.
func (c *Call) States() []bucket.State {
	out := make([]bucket.State, len(c.Items))
	for i := range c.Items {
		out[i] = c.Items[i].State
	}
	return out
}

// Hold makes c hold one count of n (a count of calls under way) until it
// is released: a count its caller took, which must last while the call
// may still be decided, and an abandoned call outlives its caller's wait.
// Release ends the hold.
func (c *Call) Hold(n *atomic.Int64) { c.held = n }

// Release returns c to the pool, ending its Hold. It must not be used afterwards, and must
// not be released if Wait reported it abandoned.
func (c *Call) Release() {
	if c.held != nil {
		c.held.Add(-1)
		c.held = nil
	}
	clear(c.Items) // drop string and limit references
	clear(c.Members)
	c.Items, c.Members, c.ranges = c.Items[:0], c.Members[:0], c.ranges[:0]
	c.Atomic, c.fn, c.cancel, c.decideHook, c.uncounted, c.spanNow, c.Now, c.oneMsg = false, nil, false, nil, false, 0, 0, false
	c.Wait = 0
	callPool.Put(c)
}

// AddItem appends an item serving member m (as its First item, or Second
// if second; m < 0 for an item that serves no member) and returns its
// index.
func (c *Call) AddItem(it Item, m int32, second bool) int32 {
	i := c.NewItem(m, second)
	it.member, it.second, it.canon = m, second, i
	c.Items[i] = it
	return i
}

// NewItem appends a zero item serving member m, as AddItem does, and
// returns its index, for the caller to fill in place (an Item is two cache
// lines: copying one costs as much as filling it).
func (c *Call) NewItem(m int32, second bool) int32 {
	i := int32(len(c.Items))
	c.Items = append(c.Items, Item{})
	it := &c.Items[i]
	it.member, it.second, it.canon = m, second, i
	return i
}

// SetItems makes Items n long (reusing its storage) for SetItem.
func (c *Call) SetItems(n int) {
	c.Items = slices.Grow(c.Items[:0], n)[:n]
}

// SetItem resets item i to serve member m as its First item and returns
// it, for the caller to fill in place. Callers that know every item's
// partition up front place them grouped by partition this way, which
// spares Decide the sorting.
func (c *Call) SetItem(i int32, m int32) *Item {
	it := &c.Items[i]
	*it = Item{member: m, canon: i}
	return it
}

// ItemErr returns the first error among the items of member m.
func (c *Call) ItemErr(m int) error {
	mem := &c.Members[m]
	if err := c.Items[mem.First].Err; err != nil {
		return err
	}
	if mem.Second >= 0 {
		return c.Items[mem.Second].Err
	}
	return nil
}

// FirstErr returns the first error among all items.
func (c *Call) FirstErr() error {
	for i := range c.Items {
		if c.Items[i].Err != nil {
			return c.Items[i].Err
		}
	}
	return nil
}

// begin readies c for a phase of n messages.
func (c *Call) begin(n int) {
	c.remaining.Store(int32(n))
	c.state.Store(stateQueued)
}

// partDone finishes one message of the current phase.
func (c *Call) partDone() {
	if c.remaining.Add(-1) != 0 {
		return
	}
	if c.inline {
		return // its caller runs it and sees remaining reach 0 (see Partition.send)
	}
	if c.state.Swap(stateDone) == stateAbandoned {
		c.Release() // its caller left; the call is ours to recycle
		return
	}
	c.done <- struct{}{}
}

// claim is called by a partition before it acts on a cancelable call; false
// means the caller gave up first and nothing may be done.
func (c *Call) claim() bool {
	return !c.cancel || c.state.CompareAndSwap(stateQueued, stateClaimed) ||
		c.state.Load() == stateClaimed // rerun after being parked
}

// wait blocks until the current phase is done. A cancelable call returns
// ctx's error if ctx ends first; the call then belongs to the partitions and
// must not be released by the caller.
func (c *Call) wait(ctx context.Context) error {
	stop := ctx.Done()
	if stop == nil || !c.cancel {
		<-c.done
		return nil
	}
	select {
	case <-c.done:
		return nil
	case <-stop:
	}
	for {
		switch s := c.state.Load(); s {
		case stateQueued, stateClaimed:
			if c.state.CompareAndSwap(s, stateAbandoned) {
				return ctx.Err()
			}
		default: // done: the signal is sent or about to be
			<-c.done
			return nil
		}
	}
}
