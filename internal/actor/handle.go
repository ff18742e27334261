package actor

import (
	"github.com/seed7fbd42b6/ratelimit/internal/bucket"
	"github.com/seed7fbd42b6/ratelimit/internal/wal"
)

func (p *Partition) handle(m msg) {
	c := m.call
	if !c.claim() {
		c.partDone() // abandoned before we took it: do nothing
		return
	}
	switch m.kind {
	case kindCommit:
		p.commit(m)
		return
	case kindAbort:
		p.release(m)
		c.partDone()
		return
	case kindRun:
		// Everything fn can see has gone to the log first, so a barrier
		// appended after Run returns follows it (Limiter.Snapshot).
		p.flush()
		c.fn(p)
		c.partDone()
		return
	}
	if p.blocked(m) {
		return
	}
	switch m.kind {
	case kindDecide:
		if p.failed != nil && writes(c) {
			p.fail(m, p.failed)
			return
		}
		p.decide(m)
	case kindPeek:
		_ = p.load(m, false) // items serve no member: never refused
		c.partDone()
	case kindChain:
		p.chain(m)
	case kindReset:
		if p.failed != nil {
			p.fail(m, p.failed)
			return
		}
		for i := m.lo; i < m.hi; i++ {
			it := &c.Items[i]
			p.buckets.del(it.Hash, it.ID)
			p.record(it.Hash, &wal.Record{Name: it.ID.Name, Key: it.ID.Key, Shard: it.ID.Shard, Delete: true})
			it.wrote = true
		}
		p.pending = append(p.pending, m)
	}
}

// blocked parks m if one of its buckets is held by another call.
func (p *Partition) blocked(m msg) bool {
	if len(p.held) == 0 && len(p.parked) == 0 {
		return false
	}
	for i := m.lo; i < m.hi; i++ {
		id := m.call.Items[i].ID
		owner, ok := p.held[id]
		if ok && owner != m.call || !ok && !p.rerun && len(p.parked[id]) > 0 {
			// Held, or others wait for it: queue behind them.
			p.parked[id] = append(p.parked[id], m)
			return true
		}
	}
	return false
}

// load fills the items' states from the map, holding them if hold is set.
// It returns ErrFull, loading nothing, if the items that members may write
// and the partition does not hold would take it past its most buckets
// (counting the new buckets other calls hold). Held items that are new and
// may be written are counted in heldNew until release.
func (p *Partition) load(m msg, hold bool) error {
	c := m.call
	if room := p.maxBuckets - p.buckets.len() - p.heldNew; room < int(m.hi-m.lo) {
		need := 0
		for i := m.lo; i < m.hi; i++ {
			if c.Items[i].canon == i && p.refuses(c, i) {
				need++
			}
		}
		if need > 0 && need > room {
			return ErrFull
		}
	}
	for i := m.lo; i < m.hi; i++ {
		it := &c.Items[i]
		if it.canon != i {
			continue
		}
		found := p.loadItem(it)
		if hold {
			p.held[it.ID] = c
			if !found && mayStore(c, i) {
				it.heldNew = true
				p.heldNew++
			}
		}
	}
	return nil
}

// mayStore reports whether a member of c may store the bucket of item i,
// a canonical one: a member that takes from it, whichever of the
// bucket's repeats in an atomic call serves it (the items after i that
// share its canon). A credit never stores a bucket it did not hold (an
// absent bucket is full, and a credit leaves it full), nor does a check.
func mayStore(c *Call, i int32) bool {
	takes := func(it *Item) bool { return it.member >= 0 && c.Members[it.member].Op == OpTake }
	if takes(&c.Items[i]) {
		return true
	}
	for j := i + 1; j < int32(len(c.Items)) && c.Items[j].canon == i; j++ {
		if takes(&c.Items[j]) {
			return true
		}
	}
	return false
}

// refuses reports whether item i of c, a canonical one, names a bucket
// the partition does not hold and a member of c may have to store. Only
// called when the partition is near its most buckets.
func (p *Partition) refuses(c *Call, i int32) bool {
	return mayStore(c, i) && !p.has(&c.Items[i])
}

// refusesOp reports whether it names a bucket the partition does not hold
// and a member of op would have to store: a take.
func (p *Partition) refusesOp(it *Item, op Op) bool {
	return op == OpTake && !p.has(it)
}

// has reports whether the partition's table holds it's bucket.
func (p *Partition) has(it *Item) bool {
	_, _, ok := p.buckets.getRef(it.Hash, it.ID)
	return ok
}

// loadItem loads it's bucket, or a full one if it is absent. An absent
// bucket may have been dropped as full at a later reading than now, or
// with a stamp later than now (the clock went back since): it is then full
// as of the latest such reading or stamp, so that the refill up to it is
// not counted twice. Without drops since, a fresh bucket starts at now, as
// SEMANTICS says. A fixed window's stored start that is off its limit's
// grid (stored under another period or start: SetLimits, or a file
// reopened with changed limits) is read as the start of the window on the
// grid that holds it, so that windows keep to the grid the config sets.
func (p *Partition) loadItem(it *Item) (found bool) {
	s, ref, ok := p.buckets.getRef(it.Hash, it.ID)
	it.ref, it.refMoves = ref, p.buckets.moves
	if ok {
		it.State = s
		if it.Lim.Kind == bucket.FixedWindow {
			it.State.TS = it.Lim.WindowStart(s.TS, it.Phase)
		}
	} else {
		it.State = it.Lim.Fresh(max(p.now, p.dropped), it.Phase)
	}
	return ok
}

// decide decides m's members here, in one step.
func (p *Partition) decide(m msg) {
	if p.decideItems(m) {
		p.pending = append(p.pending, m)
	} else {
		m.call.partDone()
	}
}

// decideItems decides m's members and stores what they grant; it reports
// whether anything was stored (so that m must wait for the log). A refusal
// (ErrFull) is set on the items.
func (p *Partition) decideItems(m msg) (wrote bool) {
	c := m.call
	if c.Atomic {
		if err := p.load(m, false); err != nil {
			p.counts.Refused++
			for i := m.lo; i < m.hi; i++ {
				c.Items[i].Err = err
			}
			return false
		}
		granted := decideAll(c, p.now)
		p.counts.count(c, granted)
		if granted {
			for i := m.lo; i < m.hi; i++ {
				if it := &c.Items[i]; it.Write {
					p.store(it)
					wrote = true
				}
			}
		}
		return wrote
	}
	for i := m.lo; i < m.hi; i++ { // one item per member (see Call.Atomic)
		p.touchItem(m, i+prefetchWindow)
		it := &c.Items[i]
		mem := &c.Members[it.member]
		var u undescribed
		p.decideSingle(it, mem, &u)
		u.finish(mem)
		wrote = wrote || it.Write
	}
	return wrote
}

// decideSingle decides mem, a member of the one bucket it, and stores
// what it grants (it.Write reports it); a refusal (ErrFull) is set on
// it. A take's or a check's wait, tokens left and time until full are
// left to u's finish, which needs nothing of the partition: a caller
// holding the partition's mutex runs it after.
func (p *Partition) decideSingle(it *Item, mem *Member, u *undescribed) {
	if p.buckets.len()+p.heldNew >= p.maxBuckets && p.refusesOp(it, mem.Op) {
		it.Err = ErrFull
		p.counts.Refused++
		return
	}
	p.loadItem(it)
	if mem.Op == OpCredit {
		DecideMember(mem, it, nil, p.now)
	} else {
		u.prior, u.next = takeOne(mem, it, p.now)
		u.lim, u.now = it.Lim, p.now
	}
	p.counts.countOne(mem.Op, mem.OK, u.next.Value < 0) // a grant waits exactly when in debt (bucket.Limit.Wait)
	if it.Write {
		p.store(it)
	}
}

// commit stores m's Write items and releases m's holds.
func (p *Partition) commit(m msg) {
	if p.failed != nil {
		p.release(m)
		p.fail(m, p.failed)
		return
	}
	wrote := false
	for i := m.lo; i < m.hi; i++ {
		if it := &m.call.Items[i]; it.Write && it.canon == i {
			p.store(it)
			wrote = true
		}
	}
	p.release(m)
	if wrote {
		p.pending = append(p.pending, m)
	} else {
		m.call.partDone()
	}
}

// store writes it.State into the map (dropping it if full, since a full
// bucket equals an absent one) and records it for the log. A bucket
// decided under limits replaced since is kept under the new one, and
// judged full by it (nil, a removed limit: kept as it is).
func (p *Partition) store(it *Item) {
	lim := it.Lim
	if it.Gen < p.limGen {
		lim = p.relimit(it.ID)
	}
	del := lim != nil && lim.Full(it.State, p.now)
	if del {
		p.buckets.del(it.Hash, it.ID)
		p.dropped = max(p.dropped, p.now, it.State.TS) // see loadItem
	} else if e := it.ref; e != nil && it.refMoves == p.buckets.moves && e.id == it.ID {
		// Where loadItem found it: no second lookup. Field by field,
		// as it.State was written.
		e.s.Value, e.s.TS, e.lim = it.State.Value, it.State.TS, lim
	} else {
		p.buckets.put(it.Hash, entry{id: it.ID, s: it.State, lim: lim})
	}
	if !p.nolog {
		// Built in place: a record made and then copied as a whole
		// (memory mode never needs one) is read back in wider words
		// than it was written in, which stalls.
		var rec wal.Record
		rec.Name, rec.Key, rec.Shard, rec.Delete = it.ID.Name, it.ID.Key, it.ID.Shard, del
		if !del {
			rec.Value, rec.TS = it.State.Value, it.State.TS
		}
		p.record(it.Hash, &rec)
	}
	it.wrote = true
}

// release drops m's holds (and their count in heldNew) and readies the
// messages parked on them.
func (p *Partition) release(m msg) {
	for i := m.lo; i < m.hi; i++ {
		it := &m.call.Items[i]
		id := it.ID
		if p.held[id] != m.call {
			continue
		}
		delete(p.held, id)
		if it.heldNew {
			it.heldNew = false
			p.heldNew--
		}
		if _, ok := p.parked[id]; ok {
			p.freed = append(p.freed, id)
		}
	}
}

// writes reports whether deciding c may store anything.
func writes(c *Call) bool {
	if c.decideHook != nil {
		return true
	}
	for i := range c.Members {
		if c.Members[i].Op != OpCheck {
			return true
		}
	}
	return false
}

// record adds r, the new state of the bucket whose table hash is h, to the
// batch's records. Records hold absolute states and only a bucket's last
// one in a batch matters (replay applies them in order), so a bucket
// written again in the same batch (a hot limit) replaces its record
// rather than adding one: fewer bytes per commit, same replay. recSlot
// remembers, per hash slot, the index of the last record added there; a
// stale or colliding slot is caught by comparing the ids, and then r is
// simply appended.
func (p *Partition) record(h uint64, r *wal.Record) {
	if p.nolog {
		return // memory mode: no log, and flush never clears recs
	}
	slot := &p.recSlot[h%uint64(len(p.recSlot))]
	if i := int(*slot); i < len(p.recs) {
		if old := &p.recs[i]; old.Shard == r.Shard && old.Key == r.Key && old.Name == r.Name {
			*old = *r
			return
		}
	}
	*slot = int32(len(p.recs))
	p.recs = append(p.recs, *r)
}
