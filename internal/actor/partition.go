package actor

import (
	"fmt"
	"math"
	"runtime"
	"runtime/debug"
	"sync"

	"github.com/seed7fbd42b6/ratelimit/internal/bucket"
	"github.com/seed7fbd42b6/ratelimit/internal/wal"
)

type kind uint8

const (
	kindDecide kind = iota // decide members (atomic calls: all of them)
	kindPeek               // report the items' states
	kindCommit             // store Write items, release holds
	kindAbort              // release holds
	kindReset              // delete the items' buckets
	kindRun                // run Call.fn on the partition
	kindChain              // hold the items, pass the call on; the last partition decides
)

// msg is one call's work for one partition: the items [lo, hi).
type msg struct {
	call   *Call
	kind   kind
	k      int32 // kindChain: the index of this span in call.ranges
	lo, hi int32
}

// Partition owns a set of buckets. All its fields below mu are touched only
// by the holder of its executor token (busy): its goroutine, or a caller
// running its own message (see send and the package doc).
type Partition struct {
	mu       sync.Mutex
	inbox    []msg
	spare    []msg
	busy     bool // a goroutine holds the executor token (see doc.go)
	queue    bool // never run a sender's message inline (tests, benchmarks)
	sleeping bool
	stopped  bool
	wake     chan struct{}
	exited   chan struct{}

	group *Group
	log   Log
	nolog bool // log is NopLog (memory mode): no records, no waiters
	// maxBuckets is the most buckets the partition holds (math.MaxInt:
	// no bound): a request that needs another is refused with ErrFull.
	maxBuckets int
	heldNew    int // new buckets two-phase calls hold here: counted against maxBuckets until their commit or abort
	clock      func() int64
	buckets    table
	held       map[BucketID]*Call           // buckets prepared by a call, until its commit or abort
	parked     map[BucketID][]msg           // messages waiting for a held bucket
	freed      []BucketID                   // buckets released this batch, whose parked messages may run
	rerun      bool                         // wakeParked is running a parked message
	failed     error                        // the log's error, read once per batch
	now        int64                        // the batch's clock reading
	last       int64                        // the latest reading any batch (or sweep) here used
	dropped    int64                        // the latest reading at which, or stamp with which, a full bucket was dropped here (see loadItem)
	limGen     uint64                       // the generation of the latest Relimit
	relimit    func(BucketID) *bucket.Limit // its limit for a bucket of a named limit (nil: removed)
	recs       []wal.Record                 // this batch's records
	recSlot    [256]int32                   // by table hash: a record of this batch to replace (see record)
	pending    []msg                        // this batch's messages that wrote records
	counts     Counts                       // decisions made here
	ahead      prefetcher                   // how far this batch's lookups were touched
	lastItems  int                          // items of the largest message in the last batch
	solo       [1]msg                       // the batch of a caller that runs its own message
	lone       *Call                        // a call run by its caller, who calls CommitNow next (sendDecide)
	// denials is the published denial, which callers may repeat without
	// mu (see denial.go); allocated on its own, so that it starts a cache
	// line and shares none with the fields written under mu.
	denials *denials
	// denied is the table hash of the bucket last denied under mu, and
	// deniedRun how many times running (see decided).
	denied    uint64
	deniedRun int
}

func newPartition(log Log, clock func() int64) *Partition {
	_, nolog := log.(NopLog)
	return &Partition{
		nolog:      nolog,
		wake:       make(chan struct{}, 1),
		exited:     make(chan struct{}),
		log:        log,
		clock:      clock,
		buckets:    newTable(),
		maxBuckets: math.MaxInt,
		held:       make(map[BucketID]*Call),
		parked:     make(map[BucketID][]msg),
		last:       math.MinInt64, // clocks may read before 1970
		dropped:    math.MinInt64,
		denials:    new(denials),
	}
}

// send delivers m; false if the partition has stopped. If the partition is
// idle (no one holds its executor token, nothing is queued) the sender
// takes the token and runs m itself, then the messages that queued
// meanwhile (one more batch), and gives the token back, waking the
// partition's goroutine for whatever is still queued. That saves waking
// the goroutine and, for a caller, parking. Otherwise m is queued for the
// holder or the goroutine. Order is kept: a message runs inline only when
// nothing is queued before it. A sender may already hold other partitions'
// tokens (a chain step passing the call on); it never waits for a token,
// so tokens cannot deadlock.
func (p *Partition) send(m msg) bool {
	run, ok := p.enter(m, false)
	if run {
		ran := false
		defer crashUnlessRan(&ran)
		p.runOwn(m)
		p.leave(nil)
		ran = true
	}
	return ok
}

// sendDecide is send for the one message of a call decided on this
// partition alone (Group.Decide), which the caller has not begun. Run
// inline in memory mode, the call ends before sendDecide returns
// (c.finished), with no signal to wait for. When, in memory mode, the
// partition is idle and holds no bucket for a two-phase call, the call
// is decided at once under the partition's mutex, as a striped lock would
// decide it: no one can take the executor token meanwhile, nothing is
// queued to run after it, and no message protocol is needed. The mutex is
// taken as DecideAlone takes it (Group.lock): a sharded request meets the
// other callers of its limit there. A partition with a log never decides
// a call so, and its call goes straight to enter.
func (p *Partition) sendDecide(m msg) bool {
	if p.nolog {
		p.group.lock(&p.mu)
		if m.call.decideHook == nil && p.idleLocked() { // a test's hook may block: not under a mutex
			p.decideLocked(m)
			p.mu.Unlock()
			return true
		}
		p.mu.Unlock()
	}
	run, ok := p.enter(m, true)
	if !run {
		return ok
	}
	ran := false
	defer crashUnlessRan(&ran)
	c := m.call
	c.begin(1)
	if p.nolog {
		c.inline = true
		p.runOwn(m)
		p.leave(c)
	} else {
		p.lone = c // Group.Decide calls CommitNow after this if c waits
		p.runOwn(m)
		p.lone = nil
		p.leave(nil)
	}
	ran = true
	return true
}

// enter takes the executor token if the partition is idle (run), or
// queues m (beginning its call first if begin is set); ok is false if the
// partition has stopped. The mutex is taken as Group.lock takes it: under
// load, callers meet here on a busy partition.
func (p *Partition) enter(m msg, begin bool) (run, ok bool) {
	p.group.lock(&p.mu)
	if p.stopped {
		p.mu.Unlock()
		return false, false
	}
	if p.busy || len(p.inbox) > 0 || p.queue {
		if begin {
			m.call.begin(1)
		}
		p.inbox = append(p.inbox, m)
		p.unlockWaking(p.sleeping && !p.busy) // a holder will see m itself
		return false, true
	}
	p.busy = true
	p.denials.invalidate()
	p.mu.Unlock()
	return true, true
}

// runOwn runs the token holder's own message as a batch of one.
func (p *Partition) runOwn(m msg) {
	p.solo[0] = m
	p.processAt(p.solo[:], m.call.spanNow)
	p.solo[0] = msg{}
}

// leave runs the messages that queued while the holder ran its own (one
// more batch), then gives the token back, waking the partition's
// goroutine for whatever is still queued. For inline, a call whose end
// needs no signal while the holder runs it (see Call.inline), it records
// whether the call ended, before the token goes back: a message of it
// still parked ends later, on another goroutine, with a signal.
func (p *Partition) leave(inline *Call) {
	p.mu.Lock()
	if len(p.inbox) > 0 {
		batch := p.inbox
		p.inbox = p.spare[:0]
		p.mu.Unlock()
		p.process(batch)
		clear(batch)
		p.mu.Lock()
		p.spare = batch[:0]
	}
	if inline != nil {
		inline.inline, inline.finished = false, inline.remaining.Load() == 0
	}
	p.busy = false
	// Hand what is left to the goroutine (and let a stopping one exit).
	p.unlockWaking(p.sleeping && (len(p.inbox) > 0 || p.stopped))
}

// unlockWaking unlocks p.mu, and if wake, wakes the partition's sleeping
// goroutine (clearing sleeping under the lock, so one wake is pending at
// most and the wake channel never blocks).
func (p *Partition) unlockWaking(wake bool) {
	if wake {
		p.sleeping = false
	}
	p.mu.Unlock()
	if wake {
		p.wake <- struct{}{}
	}
}

// crashUnlessRan, deferred by a sender running a partition, turns a panic
// (or a runtime.Goexit) before *ran is set into a crash of the process, as
// a panic on the partition's own goroutine would be. A caller's recover
// (net/http recovers handler panics) must not carry on: the partition
// would keep its token forever, its state half-updated, and the other
// callers of the batch would wait forever.
func crashUnlessRan(ran *bool) {
	if *ran {
		return
	}
	r := recover()
	if r == nil {
		r = "runtime.Goexit"
	}
	stack := debug.Stack()
	go func() { panic(fmt.Sprintf("ratelimit: partition panicked on a caller's goroutine: %v\n%s", r, stack)) }()
	select {}
}

// next waits until there are messages and no one else holds the executor
// token, then takes the token and all the messages; nil once stopped, empty
// and idle.
func (p *Partition) next(limit int) []msg {
	p.mu.Lock()
	for spins := 0; len(p.inbox) == 0 || p.busy; spins++ {
		if p.stopped && !p.busy && len(p.inbox) == 0 {
			p.mu.Unlock()
			return nil
		}
		if spins < limit {
			// Let the callers just released run and queue their next
			// requests: a bigger batch costs less than a sleep and a wakeup.
			p.mu.Unlock()
			runtime.Gosched()
			p.mu.Lock()
			continue
		}
		p.sleeping = true
		p.mu.Unlock()
		<-p.wake
		p.mu.Lock()
	}
	p.busy = true
	p.denials.invalidate()
	batch := p.inbox
	p.inbox = p.spare[:0]
	p.mu.Unlock()
	return batch
}

func (p *Partition) stop() {
	p.mu.Lock()
	p.stopped = true
	p.denials.invalidate()
	p.unlockWaking(p.sleeping)
	<-p.exited
}

func (p *Partition) run() {
	defer close(p.exited)
	limit := yieldSpins
	for {
		batch := p.next(limit)
		if batch == nil {
			p.abandonParked()
			return
		}
		p.process(batch)
		limit = yieldSpins
		if p.lastItems >= bigBatch {
			limit = bigYield
		}
		clear(batch)
		p.mu.Lock()
		p.spare = batch[:0]
		p.busy = false
		p.mu.Unlock()
	}
}

// process decides one batch at a new clock reading; only the holder of the
// executor token calls it.
func (p *Partition) process(batch []msg) { p.processAt(batch, 0) }

// processAt is process at now, a reading its caller took earlier (see
// Call.now), unless a batch or sweep here has used a later one since: a
// partition's readings never go backwards, or a bucket dropped as full at
// a later reading (absent means full) could come back fresh at an earlier
// one, and the refill between the two would be counted twice.
func (p *Partition) processAt(batch []msg, now int64) {
	p.setNow(now)
	p.failed = p.log.Err()
	p.ahead = prefetcher{}
	p.lastItems = 0
	for i, m := range batch {
		p.touchAhead(batch, i)
		p.handle(m)
		p.lastItems = max(p.lastItems, int(m.hi-m.lo))
	}
	p.wakeParked()
	p.flush()
}

// setNow sets the batch's clock reading: now, unless it is 0 (none) or
// earlier than a reading used here before, then a new one.
func (p *Partition) setNow(now int64) {
	if now == 0 || now < p.last {
		now = p.clock()
	}
	p.now = now
	p.last = max(p.last, now)
}

// flush hands the batch's records to the log; the messages that wrote them
// finish when the log calls back. This is the one acknowledgement point.
func (p *Partition) flush() {
	if len(p.pending) == 0 {
		return
	}
	if p.nolog {
		for _, m := range p.pending {
			m.call.partDone()
		}
		clear(p.pending)
		p.pending = p.pending[:0]
		return
	}
	var w wal.Waiter
	own := false
	if m := p.pending[0]; len(p.pending) == 1 && m.call.oneMsg {
		m.call.w.m = m
		w = &m.call.w
		own = m.call == p.lone
	} else {
		bw := waiterPool.Get().(*batchWaiter)
		bw.msgs = append(bw.msgs, p.pending...)
		w = bw
	}
	clear(p.pending)
	p.pending = p.pending[:0]
	if own {
		p.log.AppendOwn(p.recs, w)
	} else {
		p.log.Append(p.recs, w)
	}
	clear(p.recs)
	p.recs = p.recs[:0]
}

// abandonParked fails the messages still parked when the partition stops.
func (p *Partition) abandonParked() {
	for id, ms := range p.parked {
		for _, m := range ms {
			if m.kind == kindChain {
				p.abortChain(m, ErrClosed, false)
			} else {
				p.fail(m, ErrClosed)
			}
		}
		delete(p.parked, id)
	}
}

// wakeParked runs, in arrival order, the messages parked on buckets
// released in this batch, until one of them holds the bucket again: the
// others stay parked for its release (rerunning them all would re-park
// them all, quadratic in the queue under contention).
func (p *Partition) wakeParked() {
	for i := 0; i < len(p.freed); i++ { // handling may free more
		id := p.freed[i]
		for {
			q := p.parked[id]
			if len(q) == 0 {
				delete(p.parked, id)
				break
			}
			if _, held := p.held[id]; held {
				break
			}
			m := q[0]
			q[0] = msg{}
			p.parked[id] = q[1:]
			p.rerun = true
			p.handle(m)
			p.rerun = false
		}
	}
	clear(p.freed)
	p.freed = p.freed[:0]
}

// fail finishes m with err on all its items.
func (p *Partition) fail(m msg, err error) {
	for i := m.lo; i < m.hi; i++ {
		m.call.Items[i].Err = err
	}
	m.call.partDone()
}

// yieldSpins is how many times an idle partition yields before it sleeps.
// Without it, Go's scheduler hands the processor straight back and forth
// between a partition and the one caller it just released, so batches hold
// about one request and every request costs a sleep and a wakeup; one yield
// lets the released callers queue their next requests first.
const yieldSpins = 1

// After a batch with a message of at least bigBatch items (from a
// LimitMany call: many requests of one caller), an idle partition yields
// up to bigYield times (a few microseconds) before it sleeps: a caller that
// sends big batches tends to send the next one soon, and waking a sleeping
// partition costs a futex wake of another thread.
const (
	bigBatch = 16
	bigYield = 64
)
