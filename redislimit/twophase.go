package redislimit

import (
	"context"
	"encoding/hex"
	"errors"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/seed7fbd42b6/ratelimit/internal/actor"
	"github.com/seed7fbd42b6/ratelimit/internal/bucket"
)

// twoPhase is the state of an atomic call whose buckets sit on several
// slot tags. Phase one visits the tags in ascending order, one function call
// each: the call's members on that tag are decided against the buckets'
// current states and, when all are granted, their tokens are taken and a
// hold is recorded (a key that expires after redisStore.holdTTL). A denial
// stops phase one; phase two then ends every hold taken so far by giving
// the tokens back (the bucket's state before the call if nothing touched
// it since, else a credit of no more than the least room the bucket has
// had since the hold: see script.lua's "Holds"), or, when every tag granted,
// by dropping the holds. Nothing waits in a function, so nothing deadlocks;
// a request meeting a held bucket is decided against the tokens already
// taken; a client that dies between the phases leaves its tokens taken,
// which can only under-admit. The last tag needs no hold: nothing after it
// can fail.
//
// A two-choice member whose shards sit on two tags (the lone last shard
// of an odd Shards count) is decided by both: the lower tag holds what the
// member could take from its shard (roleHold: all of the count if the
// shard can serve it alone, else down to the most debt it may leave), the
// higher tag decides the pair against that state (rolePair) and phase two
// gives the first shard back what the decision did not use.
type twoPhase struct {
	on        bool
	id        string
	steps     int            // the first steps parts of the job are phase one, in tag order
	prior     []bucket.State // per item: its state before its step
	after     []bucket.State // per item: its state after its step (if it wrote)
	holdState []bucket.State // per member with roleHold: the state its shard had
	holdAt    []int64        // per member with roleHold: when its step read it
	held      []float64      // per member with roleHold: the value left there
	final     []bucket.State // per member with rolePair: the other shard's decided state
	finalW    []bool         // per member with rolePair: whether the decision took from it
	shared    []bool         // per member with roleHold: its bucket is used by other members of its step
	status    uint8          // the status the replay of the last step computed
	abort     []settleEntry  // what phase two gives back on an abort
	abortOf   []int32        // per step: the end of its entries in abort
}

func (tp *twoPhase) reset() {
	tp.on, tp.id, tp.steps, tp.status = false, "", 0, 0
	tp.abort, tp.abortOf = tp.abort[:0], tp.abortOf[:0]
}

// afterStep, set by tests, runs after each granted step of phase one
// (step k of n), before the next step or phase two.
var afterStep func(k, n int)

// errPairAcross: a pair across slots whose held share cannot cover the
// decision (counts near the float64 limit).
var errPairAcross = errors.New("redislimit: a request on two shards in two slots could not be decided exactly")

// twoPhase decides j's atomic call across tags (see type twoPhase).
func (j *job) twoPhase() {
	c := j.c
	tp := &j.tp
	tp.on = true
	var id [16]byte
	for k := 0; k < 16; k += 8 {
		v := rand.Uint64()
		for b := range 8 {
			id[k+b] = byte(v >> (8 * b))
		}
	}
	tp.id = hex.EncodeToString(id[:])
	nm := len(c.Members)
	tp.prior = grow(tp.prior, len(c.Items))
	tp.after = grow(tp.after, len(c.Items))
	tp.holdState = grow(tp.holdState, nm)
	tp.holdAt = grow(tp.holdAt, nm)
	tp.held = grow(tp.held, nm)
	tp.final = grow(tp.final, nm)
	tp.finalW = grow(tp.finalW, nm)
	tp.shared = grow(tp.shared, nm)
	j.setCanon()
	j.planSteps()

	for k := 0; k < tp.steps; k++ {
		pt := &j.parts[k]
		if k < tp.steps-1 {
			pt.hold = j.s.ks.hold(pt.tag, tp.id)
		}
		j.fillPairs(pt)
		j.run(context.Background(), j.parts[k:k+1])
		switch {
		case pt.err != nil:
			failItems(c, pt.err)
			j.settle(k, false, k)
			return
		case tp.status == 2:
			failItems(c, errPairAcross)
			j.settle(k, false, -1)
			return
		case tp.status == 0:
			j.settle(k, false, -1)
			j.readRest(k + 1)
			j.s.denials.Add(1)
			return
		}
		if k < tp.steps-1 {
			j.recordAbort(pt)
		}
		if afterStep != nil {
			afterStep(k, tp.steps)
		}
	}
	j.settle(tp.steps-1, true, -1)
	j.s.count(c)
}

// planSteps makes phase one's parts, one per tag in ascending order, each
// deciding the call's members there in call order.
func (j *job) planSteps() {
	c := j.c
	var seen [Slots]bool
	var order []int32
	for i := range c.Items {
		if t := c.Items[i].Part; !seen[t] {
			seen[t] = true
			order = append(order, t)
		}
	}
	slices.Sort(order)
	j.parts = j.parts[:0]
	j.dms = j.dms[:0]
	for _, t := range order {
		p := j.addPart(t, unitDecide)
		p.atomic = true
		p.lo = int32(len(j.dms))
		for m := range c.Members {
			mem := &c.Members[m]
			a, b := mem.First, mem.Second
			ta := c.Items[a].Part
			switch {
			case b < 0 || c.Items[b].Part == ta:
				if ta == t {
					j.dms = append(j.dms, dmember{m: int32(m), a: a, b: b})
				}
			default: // a pair across two tags
				lo, hi := a, b
				if c.Items[b].Part < ta {
					lo, hi = b, a
				}
				switch t {
				case c.Items[lo].Part:
					j.dms = append(j.dms, dmember{m: int32(m), a: lo, b: -1, role: roleHold})
				case c.Items[hi].Part:
					j.dms = append(j.dms, dmember{m: int32(m), a: hi, b: -1, role: rolePair, otherItem: lo, otherIsA: lo == a})
				}
			}
		}
		p.hi = int32(len(j.dms))
	}
	j.tp.steps = len(j.parts)
	for k := range j.parts { // a roleHold's bucket shared with other members of its step
		pt := &j.parts[k]
		for _, d := range j.dms[pt.lo:pt.hi] {
			if d.role != roleHold {
				continue
			}
			sh := false
			for _, e := range j.dms[pt.lo:pt.hi] {
				if e.m != d.m && (j.canon[e.a] == j.canon[d.a] || e.b >= 0 && j.canon[e.b] == j.canon[d.a]) {
					sh = true
				}
			}
			j.tp.shared[d.m] = sh
		}
	}
}

// fillPairs gives pt's rolePair members the state their other shard was
// held at.
func (j *job) fillPairs(pt *part) {
	tp := &j.tp
	for k := pt.lo; k < pt.hi; k++ {
		d := &j.dms[k]
		if d.role != rolePair {
			continue
		}
		o := &j.c.Items[d.otherItem]
		d.otherAt = tp.holdAt[d.m]
		d.other = o.Lim.Project(tp.holdState[d.m], d.otherAt)
		d.held = tp.held[d.m]
	}
}

// readStep reads a phase-one step's reply and replays it.
func (j *job) readStep(pt *part, rd *reply) {
	st := rd.byte1()
	j.readPriors(rd, pt)
	if rd.err != nil {
		return
	}
	j.tp.status = j.replayStep(pt, pt.now, false)
	if j.tp.status != st {
		pt.err = errDisagree
	} else if st == 1 && verifyStates {
		j.verify(pt, rd, j.dms[pt.lo:pt.hi])
	}
}

// replayStep decides pt's members here, as the function did, on the prior
// states read into the items, and returns the step's status (0 denied, 1
// granted, 2 errPairAcross). Every member is decided (so each has its
// outcome, as the partitions give), but the status is the first member's
// that is not granted.
func (j *job) replayStep(pt *part, now int64, readOnly bool) uint8 {
	c := j.c
	tp := &j.tp
	ds := j.dms[pt.lo:pt.hi]
	for _, d := range ds {
		for _, i := range [2]int32{d.a, d.b} {
			if i >= 0 {
				tp.prior[i] = c.Items[i].State
				c.Items[i].Write = false
			}
		}
	}
	prior := j.repeatPriors(ds)
	status := uint8(1)
	for _, d := range ds {
		mem := &c.Members[d.m]
		st := uint8(1)
		switch d.role {
		case roleNone:
			j.decideMember(mem, d.a, d.b, now)
			if !mem.OK {
				st = 0
			}
		case roleHold:
			it := &c.Items[j.canon[d.a]]
			pa := it.Lim.Project(it.State, now)
			tp.holdState[d.m], tp.holdAt[d.m] = it.State, now
			tp.held[d.m] = pa.Value
			if mem.Op == actor.OpTake {
				w := tentative(it.Lim, pa.Value, mem.Count, mem.Reserve)
				tp.held[d.m] = w
				if !readOnly {
					it.State, it.Write = bucket.State{Value: w, TS: pa.TS}, true
				}
			}
		case rolePair:
			st = j.decidePair(d, mem, now)
		}
		if status == 1 {
			status = st
		}
	}
	if status != 1 && prior != nil {
		j.repeatsWait(ds, prior, now)
	}
	if status != 1 {
		for _, d := range ds {
			c.Items[j.canon[d.a]].Write = false
			if d.b >= 0 {
				c.Items[j.canon[d.b]].Write = false
			}
		}
	}
	return status
}

// decidePair decides a pair across tags in its second step, at the
// earlier of the two steps' clock readings (two servers' clocks differ;
// the earlier cannot credit either shard with time it has not seen).
func (j *job) decidePair(d dmember, mem *actor.Member, now int64) uint8 {
	c := j.c
	tp := &j.tp
	o := &c.Items[j.canon[d.otherItem]]
	l := &c.Items[j.canon[d.a]]
	at := tp.holdAt[d.m]
	pa := o.Lim.Project(tp.holdState[d.m], at)
	o.State = tp.holdState[d.m] // the same decision as on pa when both read one clock, and the partitions' waits
	if at != now {
		o.State = pa
		now = min(at, now)
	}
	o.Write = false
	a, b := o, l
	if !d.otherIsA {
		a, b = l, o
	}
	actor.DecideMember(mem, a, b, now)
	if w := l; mem.OK && len(c.Members) == 1 && mem.Op == actor.OpTake && o.Write != l.Write {
		// One shard served a lone take: report its own refill time, as the
		// partitions' hold-free path for a pair across partitions does.
		if o.Write {
			w = o
		}
		mem.UntilFull = w.Lim.UntilFull(w.State, now)
	}
	tp.finalW[d.m] = o.Write
	tp.final[d.m] = o.State
	o.Write = false
	if !mem.OK {
		return 0
	}
	left := pa.Value
	if tp.finalW[d.m] {
		left = o.State.Value
	}
	if mem.Op == actor.OpTake && left < tp.held[d.m] {
		return 2
	}
	return 1
}

// tentative is the value a roleHold leaves on its shard, whose projected
// value is v: v - count if the shard can serve the request alone, else
// the most debt the request may leave (0 without a reservation), else v.
// It mirrors script.lua.
func tentative(l *bucket.Limit, v, count float64, reserve bool) float64 {
	al := 0.0
	if reserve {
		al = math.Inf(1)
		if l.MaxReserved > 0 {
			al = l.MaxReserved
		}
	}
	if w := v - count; w >= -al && !math.IsInf(w, -1) {
		return w
	}
	if !math.IsInf(al, 1) && v > -al {
		return -al
	}
	return v
}

// recordAbort notes how to give back what a granted step took.
func (j *job) recordAbort(pt *part) {
	c := j.c
	tp := &j.tp
	for _, d := range j.dms[pt.lo:pt.hi] {
		for _, i := range [2]int32{d.a, d.b} {
			if i < 0 || j.canon[i] != i || !c.Items[i].Write {
				continue
			}
			it := &c.Items[i]
			tp.after[i] = it.State
			amount := it.Lim.Project(tp.prior[i], pt.now).Value - it.State.Value
			tp.abort = append(tp.abort, settleEntry{
				item: i, expect: it.State, expectP: !it.Lim.Full(it.State, pt.now),
				target: tp.prior[i], targetP: j.present[i], amount: max(amount, 0),
			})
			it.Write = false // one entry per bucket
		}
	}
	tp.abortOf = append(tp.abortOf, int32(len(tp.abort)))
}

// settle ends the holds of the first n steps: commit drops them (and gives
// a pair's first shard back what the decision did not use; a hold with
// nothing to give back is dropped in the background, with the tag's next
// call, so a granted call waits for no more than phase one), abort gives
// back what they took. Step also, if >= 0, had its reply lost: its hold
// (if any) is dropped and whatever it took stays taken. Errors are not
// reported: an unended hold expires, and its tokens stay taken.
func (j *job) settle(n int, commit bool, lost int) {
	tp := &j.tp
	c := j.c
	base := len(j.parts)
	j.ses = j.ses[:0]
	var drop []int32
	var dropKeys []string
	for k := 0; k < n; k++ {
		step := &j.parts[k]
		if step.hold == "" {
			continue
		}
		lo := len(j.ses)
		if commit {
			for _, d := range j.dms[step.lo:step.hi] {
				if d.role != roleHold || c.Members[d.m].Op != actor.OpTake {
					continue
				}
				it := &c.Items[d.a]
				expect := tp.after[j.canon[d.a]] // the step's last state of the bucket
				pairAt := j.parts[j.pairStep(d.m)].now
				target, targetP := tp.holdState[d.m], j.present[d.a]
				left := it.Lim.Project(tp.holdState[d.m], tp.holdAt[d.m]).Value
				if tp.finalW[d.m] {
					target, targetP, left = tp.final[d.m], !it.Lim.Full(tp.final[d.m], pairAt), tp.final[d.m].Value
				}
				amount := left - tp.held[d.m]
				if tp.shared[d.m] {
					target, targetP = bucket.State{Value: expect.Value + amount, TS: expect.TS}, true
				}
				j.ses = append(j.ses, settleEntry{item: d.a, expect: expect, expectP: !it.Lim.Full(expect, step.now),
					target: target, targetP: targetP, amount: max(amount, 0)})
			}
		} else {
			from := int32(0)
			if k > 0 {
				from = tp.abortOf[k-1]
			}
			j.ses = append(j.ses, tp.abort[from:tp.abortOf[k]]...)
		}
		if commit && len(j.ses) == lo {
			drop = append(drop, step.tag) // nothing to give back: dropped in the background
			dropKeys = append(dropKeys, step.hold)
			continue
		}
		p := j.addPart(step.tag, unitSettle)
		p.hold, p.lo, p.hi = step.hold, int32(lo), int32(len(j.ses))
	}
	if len(drop) > 0 {
		j.s.dropHolds(drop, dropKeys)
	}
	if lost >= 0 && j.parts[lost].hold != "" {
		p := j.addPart(j.parts[lost].tag, unitSettle)
		p.hold, p.lo, p.hi = j.parts[lost].hold, int32(len(j.ses)), int32(len(j.ses))
	}
	if len(j.parts) > base {
		tp.on = false // settle parts read no decisions
		j.run(context.Background(), j.parts[base:])
		tp.on = true
	}
	j.parts = j.parts[:base]
}

// pairStep returns the index of the step that decides member m's pair.
func (j *job) pairStep(m int32) int {
	for k := 0; k < j.tp.steps; k++ {
		pt := &j.parts[k]
		for _, d := range j.dms[pt.lo:pt.hi] {
			if d.m == m && d.role == rolePair {
				return k
			}
		}
	}
	return 0
}

// readRest gives the members of the steps from k on (not run: the call
// was denied before them) their outcomes, decided read-only on the states
// of their buckets now.
func (j *job) readRest(k int) {
	if k >= j.tp.steps {
		return
	}
	c := j.c
	base := len(j.parts)
	j.its = j.its[:0]
	for s := k; s < j.tp.steps; s++ {
		step := &j.parts[s]
		p := j.addPart(step.tag, unitPeek)
		p.lo = int32(len(j.its))
		for _, d := range j.dms[step.lo:step.hi] {
			j.its = append(j.its, d.a)
			if d.b >= 0 {
				j.its = append(j.its, d.b)
			}
		}
		p.hi = int32(len(j.its))
	}
	j.tp.on = false
	j.run(context.Background(), j.parts[base:])
	j.tp.on = true
	for s := k; s < j.tp.steps; s++ {
		read := &j.parts[base+s-k]
		if read.err != nil {
			continue // those members keep no outcome; the call is denied anyway
		}
		j.replayStep(&j.parts[s], read.now, true)
	}
	for i := range c.Items {
		c.Items[i].Err = nil
	}
	j.parts = j.parts[:base]
}

// dropHolds deletes the holds keys, one on each of tags, in the
// background: a job of its own, which frees itself once done (Close sends
// it and waits for it), queued to go with the next round rather than
// start one. If the store is closing, the holds expire instead. The job
// is registered and queued under s.mu, so Close, which flushes the queue
// under s.mu once it refuses new jobs, never waits for a drop it did not
// send.
func (s *redisStore) dropHolds(tags []int32, keys []string) {
	j := jobPool.Get().(*job)
	j.s, j.async = s, true
	for i, t := range tags {
		p := j.addPart(t, unitSettle)
		p.hold = keys[i]
	}
	j.state.Store(jobQueued)
	j.pending.Store(int32(len(j.parts)))
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.beginLocked() {
		j.free()
		return
	}
	s.b.queue(j.parts)
}
