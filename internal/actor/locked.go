package actor

// Deciding under the partitions' mutexes. In memory mode, a partition
// that is idle (no executor, nothing queued, no bucket held for a
// two-phase call) can be decided on directly by a caller holding its
// mutex, as a striped lock would be: no one can take its executor token
// meanwhile, and nothing is queued to run after. A call over several such
// partitions takes their mutexes in partition order (the order every
// multi-partition protocol here uses), so it cannot deadlock, and decides
// all its buckets at once: no holds, no messages. Mutexes are otherwise
// held only briefly and never while waiting for another, so the ordered
// acquisition cannot wait on a cycle.

// idleLocked reports, with p.mu held, whether p can be decided on directly.
func (p *Partition) idleLocked() bool {
	return p.nolog && !p.busy && !p.stopped && !p.queue && len(p.inbox) == 0 && len(p.held) == 0 && len(p.parked) == 0
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

// DecideAlone decides mem, a member of the one bucket it, with no Call:
// under the mutex of it's partition, if that partition is idle (see the
// top of this file), as a call of that one member would be decided. False
// means nothing was done (the partition is busy, stopped or keeps a log):
// send a call instead. it.Err reports a refusal, as in a call.
//
// The mutex is held for the decision only: the clock is read before it
// is taken (again under it if another caller has since decided later),
// and a take's wait and the rest of mem's outputs are worked out after it
// is released, from the states the decision saw. A bucket that keeps
// denying the same request is published, and that request is then denied
// without the mutex until the bucket changes (see denial.go).
func (g *Group) DecideAlone(it *Item, mem *Member) bool {
	p := g.parts[it.Part]
	now := g.clock()
	var u undescribed
	if mem.Op != OpCredit && p.denials.repeat(it, mem, now, g.clock, &u) {
		u.finish(mem)
		return true
	}
	p.mu.Lock()
	if !p.idleLocked() {
		p.mu.Unlock()
		return false
	}
	ran := false
	defer crashUnlessRan(&ran)
	p.setNow(now)
	p.decideSingle(it, mem, &u)
	if at, ok := p.decided(it, mem); ok {
		u.grantAt, u.timed = at, true
	}
	ran = true
	p.mu.Unlock()
	u.finish(mem)
	return true
}

// decideLocked decides an atomic call over several partitions under their
// mutexes, if every one of them is idle (see the top of this file); false
// means nothing was done, and the call takes the two-phase path.
func (g *Group) decideLocked(c *Call) bool {
	locked := 0
	defer func() {
		for _, r := range c.ranges[:locked] {
			g.parts[r.part].mu.Unlock()
		}
	}()
	for _, r := range c.ranges {
		p := g.parts[r.part]
		p.mu.Lock()
		locked++
		if !p.idleLocked() {
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
	}
	ran = true
	return true
}
