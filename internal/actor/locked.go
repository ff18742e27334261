package actor

import (
	"context"
	"sync"
)

// Deciding under the partitions' mutexes. A partition that is idle (no
// executor, nothing queued, no bucket held for a two-phase call) can be
// decided on directly by a caller holding its mutex, as a striped lock
// would be: no one can take its executor token meanwhile, and nothing is
// queued to run after. With a log, only a lone request is (DecideAlone):
// its record goes to the log before the mutex is released, as a batch's
// records do before its executor gives the token back. In memory mode, a
// call over several such partitions takes all their mutexes and decides
// all its buckets at once: no holds, no messages. It waits for a mutex
// either holding none, or in partition order (the order every
// multi-partition protocol here uses); mutexes are otherwise held only
// briefly and never while waiting for another partition's, so no wait is
// on a cycle (see lockRanges).

// idleLocked reports, with p.mu held, whether a call can be decided on p
// directly (memory mode only).
func (p *Partition) idleLocked() bool { return p.nolog && p.idleAlone() }

// idleAlone reports, with p.mu held, whether DecideAlone can decide on p,
// in memory or with a log: no executor, nothing queued, no bucket held.
func (p *Partition) idleAlone() bool {
	return !p.busy && !p.stopped && !p.queue && len(p.inbox) == 0 && len(p.held) == 0 && len(p.parked) == 0
}

// decideLocked decides m's call under p.mu (see sendDecide). A panic here
// crashes the process, as one on the partition's goroutine would: the
// mutex must not stay locked under a caller's recover.
func (p *Partition) decideLocked(m msg) {
	ran := false
	defer crashUnlessRan(&ran)
	p.setNow(m.call.spanNow)
	if p.decideItems(m) {
		for i := m.lo; i < m.hi; i++ {
			p.denials.wrote(&m.call.Items[i])
		}
	}
	m.call.finished = true
	ran = true
}

// RepeatDenial decides mem, a take or check of the one bucket it, from
// its partition's published denial, if that denial applies and still
// denies (see denial.go): then mem's outputs are filled, with no mutex,
// and denied is true. Otherwise nothing is done, and now is the clock
// reading to decide it at (DecideAlone). it.Hash is not read: a caller
// may leave it to be worked out only when the request goes on.
func (g *Group) RepeatDenial(it *Item, mem *Member) (now int64, denied bool) {
	p := g.parts[it.Part]
	now = g.clock()
	if mem.Op == OpCredit || (!p.nolog && p.log.Err() != nil) {
		return now, false // a failed log: the call path fails what writes, as a batch does
	}
	var u undescribed
	if !p.denials.repeat(it, mem, now, g.clock, &u) {
		return now, false
	}
	u.finish(mem)
	return now, true
}

// DecideAlone decides mem, a member of the one bucket it, with no Call,
// at now (a reading taken before it, by RepeatDenial): under the mutex of
// it's partition, if that partition is idle (see the top of this file),
// as a call of that one member would be decided. False means nothing was
// done (the partition is busy or stopped, or its log has failed): send a
// call instead. it.Err reports a refusal, as in a call.
//
// The mutex is held for the decision only: the clock is read before it
// is taken (again under it if another caller has since decided later),
// and a take's wait and the rest of mem's outputs are worked out after it
// is released, from the states the decision saw. A bucket that keeps
// denying the same request is published, and that request is then denied
// without the mutex until the bucket changes (RepeatDenial).
//
// On a partition that keeps a log, a decision that wrote the bucket hands
// its record to the log under the mutex, as a batch of one, and
// DecideAlone returns once the log has committed it (a failed commit is
// it.Err, as a call's written items get) or ctx has ended: then err is
// ctx's error, and the grant, decided, may still be committed.
func (g *Group) DecideAlone(ctx context.Context, it *Item, mem *Member, now int64) (done bool, err error) {
	p := g.parts[it.Part]
	if !p.nolog && p.log.Err() != nil {
		return false, nil
	}
	g.lock(&p.mu)
	if !p.idleAlone() {
		p.mu.Unlock()
		return false, nil
	}
	ran := false
	defer crashUnlessRan(&ran)
	p.setNow(now)
	var u undescribed
	p.decideSingle(it, mem, &u)
	if at, ok := p.decided(it, mem); ok {
		u.grantAt, u.timed = at, true
	}
	var w *aloneWaiter
	if len(p.recs) > 0 {
		w = aloneWaiters.Get().(*aloneWaiter)
		p.log.AppendOwn(p.recs, w)
		clear(p.recs)
		p.recs = p.recs[:0]
	}
	ran = true
	p.mu.Unlock()
	u.finish(mem)
	if w == nil {
		return true, nil
	}
	p.log.CommitNow() // a lone caller commits its own grant
	return true, w.wait(ctx, it)
}

// aloneWaiter is the log's waiter for a record DecideAlone appended.
type aloneWaiter struct{ done chan error }

var aloneWaiters = sync.Pool{New: func() any { return &aloneWaiter{done: make(chan error, 1)} }}

func (w *aloneWaiter) Committed(err error) { w.done <- err }

// wait waits for the commit of it's record, or for ctx to end. The waiter
// goes back to the pool only once the log has called it: after ctx ends,
// the log still does, later, into the buffer of its channel.
func (w *aloneWaiter) wait(ctx context.Context, it *Item) error {
	var err error
	select {
	case err = <-w.done:
	default:
		select {
		case err = <-w.done:
		case <-ctx.Done():
			select {
			case err = <-w.done: // committed as well: the answer is known
			default:
				return ctx.Err()
			}
		}
	}
	aloneWaiters.Put(w)
	if err != nil {
		it.Err = err
	}
	return nil
}

// decideLocked decides an atomic call over several partitions under their
// mutexes, if every one of them is idle (see the top of this file); false
// means nothing was done, and the call takes the two-phase path. A call
// that a published denial (denial.go) denies is decided without that
// partition's mutex when it can be (decideDenied).
func (g *Group) decideLocked(c *Call) bool {
	if !g.parts[0].nolog {
		return false // with a log, only DecideAlone decides under a mutex
	}
	var r record
	if k, ok := g.deniedRange(c, &r); ok && g.decideDenied(c, k, &r) {
		return true
	}
	g.lockRanges(c, -1)
	defer g.unlockRanges(c, -1)
	for _, r := range c.ranges {
		if !g.parts[r.part].idleLocked() {
			return false
		}
	}
	ran := false
	defer crashUnlessRan(&ran)
	now := g.clock() // one reading for every partition, as a batch of each
	for _, r := range c.ranges {
		p := g.parts[r.part]
		p.now, p.last = now, max(p.last, now)
		if err := p.load(msg{call: c, kind: kindDecide, lo: r.lo, hi: r.hi}, false); err != nil {
			p.counts.Refused++
			for i := range c.Items {
				c.Items[i].Err = err
			}
			ran = true
			return true
		}
	}
	granted := decideAll(c, now)
	first := g.parts[c.ranges[0].part]
	first.counts.count(c, granted)
	if granted {
		for _, r := range c.ranges {
			p := g.parts[r.part]
			for i := r.lo; i < r.hi; i++ {
				if it := &c.Items[i]; it.Write && it.canon == i {
					p.store(it)
					p.denials.wrote(it)
				}
			}
		}
	} else {
		g.publishDenials(c)
	}
	ran = true
	return true
}

// publishDenials follows the denial of c under its partitions' mutexes:
// each member denied on a bucket of its own (one bucket, named by no other
// item of c, so that its state is as loaded) counts towards publishing its
// denial, as DecideAlone's do (Partition.decided).
func (g *Group) publishDenials(c *Call) {
	for i := range c.Items {
		if c.Items[i].canon != int32(i) {
			return // a bucket named twice: its state may have been replayed
		}
	}
	for _, r := range c.ranges {
		p := g.parts[r.part]
		for i := r.lo; i < r.hi; i++ {
			it := &c.Items[i]
			if it.member < 0 || it.Err != nil {
				continue
			}
			if m := &c.Members[it.member]; !m.OK && m.Op != OpCredit && m.Second < 0 {
				p.decided(it, m)
			}
		}
	}
}

// deniedRange finds a range of c, one of several, that holds one bucket
// (once, or repeated), the only bucket of its first member, with a
// published denial of that member's request (denials.read), which it
// reads into r.
func (g *Group) deniedRange(c *Call, r *record) (k int, ok bool) {
	if len(c.ranges) < 2 {
		return 0, false
	}
	for k, sp := range c.ranges {
		it := &c.Items[sp.lo]
		if it.member < 0 || it.canon != sp.lo || c.Items[sp.hi-1].canon != sp.lo {
			continue // repeats are adjacent: the last item names the first's bucket, or another
		}
		m := &c.Members[it.member]
		if m.Second >= 0 || m.Op == OpCredit {
			continue
		}
		if g.parts[sp.part].denials.read(it, m, r) {
			return k, true
		}
	}
	return 0, false
}

// decideDenied decides c, whose range k a published denial r applies to,
// under the mutexes of its other partitions only: range k's bucket is read
// from r, whose state stays true while the record does. It reports whether
// it decided c: only a denial, and only if r stayed true until the end;
// otherwise nothing is written and c is decided with every mutex.
func (g *Group) decideDenied(c *Call, k int, r *record) bool {
	g.lockRanges(c, k)
	defer g.unlockRanges(c, k)
	for i, sp := range c.ranges {
		if i != k && !g.parts[sp.part].idleLocked() {
			return false
		}
	}
	ran := false
	defer crashUnlessRan(&ran)
	now := g.clock() // s is the bucket's state at any reading while the record holds
	for i, sp := range c.ranges {
		if i == k {
			continue
		}
		p := g.parts[sp.part]
		p.now, p.last = now, max(p.last, now)
		if p.load(msg{call: c, kind: kindDecide, lo: sp.lo, hi: sp.hi}, false) != nil {
			ran = true
			return false // a refusal: decided with every mutex
		}
	}
	if g.besideHook != nil {
		g.besideHook()
	}
	sp := c.ranges[k]
	it := &c.Items[sp.lo]
	it.State, it.ref = r.s, nil
	if decideAll(c, now) || !g.parts[sp.part].denials.current(r.epoch) {
		for i := range c.Items {
			c.Items[i].Write = false
		}
		ran = true
		return false
	}
	counter := c.ranges[0]
	if k == 0 {
		counter = c.ranges[1]
	}
	g.parts[counter.part].counts.count(c, false)
	ran = true
	return true
}

// lockRounds bounds the rounds of lockRanges's first protocol.
const lockRounds = 4

// lockRanges locks the mutexes of c's partitions but range skip's (-1:
// none). It first waits only while holding none of them: it tries every
// mutex, and when one is taken, it releases those it holds, waits for that
// one alone, and tries the others again. A contended partition (a global
// limit's) is so waited for by callers that hold nothing, instead of by
// callers that hold their own partitions and make the callers behind those
// wait too. After lockRounds rounds it waits in partition order, the order
// every multi-partition protocol here uses, which cannot deadlock.
func (g *Group) lockRanges(c *Call, skip int) {
	rs := c.ranges
	wait := -1 // the range whose mutex was taken, to wait for holding none
	for range lockRounds {
		if wait >= 0 {
			g.prefetch(c, wait, skip)
			g.lock(&g.parts[rs[wait].part].mu)
		}
		failed := -1
		for i, r := range rs {
			if i != wait && i != skip && !g.parts[r.part].mu.TryLock() {
				failed = i
				break
			}
		}
		if failed < 0 {
			return
		}
		for i, r := range rs[:failed] {
			if i != wait && i != skip {
				g.parts[r.part].mu.Unlock()
			}
		}
		if wait >= 0 {
			g.parts[rs[wait].part].mu.Unlock()
		}
		wait = failed
	}
	for i, r := range rs {
		if i != skip {
			g.parts[r.part].mu.Lock()
		}
	}
}

// unlockRanges unlocks what lockRanges(c, skip) locked.
func (g *Group) unlockRanges(c *Call, skip int) {
	for i, r := range c.ranges {
		if i != skip {
			g.parts[r.part].mu.Unlock()
		}
	}
}

// prefetch looks up c's buckets in each partition whose mutex is free,
// but ranges wait and skip's, under that mutex alone: lockRanges does so
// before it waits for a taken mutex (a contended partition's, a global
// limit's), so that the lookups it then makes holding that mutex find the
// other buckets in the processor's cache, and a bucket that was not (a
// key among millions) costs its miss outside the contended critical
// section.
func (g *Group) prefetch(c *Call, wait, skip int) {
	for k, r := range c.ranges {
		if k == wait || k == skip {
			continue
		}
		p := g.parts[r.part]
		if !p.mu.TryLock() {
			continue
		}
		if p.idleLocked() { // else an executor may be writing the table
			for i := r.lo; i < r.hi; i++ {
				it := &c.Items[i]
				p.buckets.getRef(it.Hash, it.ID)
			}
		}
		p.mu.Unlock()
	}
}
