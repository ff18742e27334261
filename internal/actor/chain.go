package actor

// chain handles one step of a two-phase call (Group.twoPhase). The call's
// spans are in partition order; step k holds span k's buckets (parking,
// not blocking, while another call holds one of them) and passes the call
// on to span k+1. The last step has every state: it decides, stores its own
// part, and sends commit or abort to the earlier spans. Holds therefore last
// one hop between partitions, never a trip through the caller's goroutine,
// and since every call holds in the same order, waits form no cycle.
func (p *Partition) chain(m msg) {
	c := m.call
	if err := p.load(m, true); err != nil {
		p.counts.Refused++
		p.abortChain(m, err, false)
		return
	}
	if int(m.k) < len(c.ranges)-1 {
		next := c.ranges[m.k+1]
		if !p.group.parts[next.part].send(msg{call: c, kind: kindChain, k: m.k + 1, lo: next.lo, hi: next.hi}) {
			p.abortChain(m, ErrClosed, true)
		}
		return // held until the last step commits or aborts
	}
	if p.failed != nil {
		p.abortChain(m, p.failed, true)
		return
	}
	granted := decideAll(c, p.now)
	p.counts.count(c, granted)
	k := kindAbort
	if granted {
		k = kindCommit
	}
	p.sendBack(c, m.k, k)
	if granted {
		p.commit(m)
	} else {
		p.release(m)
		c.partDone()
	}
}

// sendBack sends k (commit or abort) to the spans before span upTo.
func (p *Partition) sendBack(c *Call, upTo int32, k kind) {
	for j := int32(0); j < upTo; j++ {
		r := c.ranges[j]
		if !p.group.parts[r.part].send(msg{call: c, kind: k, lo: r.lo, hi: r.hi}) {
			for i := r.lo; i < r.hi; i++ {
				c.Items[i].Err = ErrClosed
			}
			c.partDone()
		}
	}
}

// abortChain ends a two-phase call at step m with err: the earlier spans
// abort, this one releases what it holds (if held), and the later spans,
// which never heard of the call, are finished here.
func (p *Partition) abortChain(m msg, err error, held bool) {
	c := m.call
	p.sendBack(c, m.k, kindAbort)
	if held {
		p.release(m)
	}
	// Mark everything first: once the last of these spans is finished the
	// caller may reuse the call.
	spans := len(c.ranges) - int(m.k)
	for _, r := range c.ranges[m.k:] {
		for i := r.lo; i < r.hi; i++ {
			c.Items[i].Err = err
		}
	}
	for ; spans > 0; spans-- {
		c.partDone()
	}
}
