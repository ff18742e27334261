package actor

// twoChoices decides a single two-shard take whose shards live on two
// partitions without holding either in the common case: read both (no
// hold), decide on the caller's goroutine, then
//   - a denial is answered at once: it rests on states read a moment ago,
//     which later grants could only have lowered (a concurrent credit or
//     reset may be ordered after it);
//   - a grant served by one shard is re-decided by that shard's partition
//     alone, atomically, as an ordinary one-bucket request, and stands if
//     the shard can still serve it;
//   - a split across both shards, or a take that lost a race, falls back to
//     the exact two-phase reservation.
//
// So a hot sharded limit costs two round trips per grant and one per
// denial, and holds nothing.
func (g *Group) twoChoices(c *Call) {
	g.phase(c, kindPeek, c.ranges)
	if c.FirstErr() != nil {
		return
	}
	m := &c.Members[0]
	now := g.clock()
	decideMember(c, m, now)
	a, b := &c.Items[m.First], &c.Items[m.Second]
	switch {
	case !m.OK:
		g.mu.Lock()
		g.counts.Denials++
		g.mu.Unlock()
		return
	case a.Write && b.Write:
	default:
		chosen, other := a, b
		if b.Write {
			chosen, other = b, a
		}
		chosen.Write = false
		one := NewCall()
		defer one.Release()
		one.Atomic = true
		i := one.AddItem(*chosen, 0, false)
		one.Members = append(one.Members, Member{Op: OpTake, Count: m.Count, Reserve: m.Reserve, First: i, Second: -1})
		one.uncounted = true // counted here, once, whichever way it ends
		one.begin(1)
		if !g.parts[chosen.Part].send(msg{call: one, kind: kindDecide, hi: 1}) {
			chosen.Err = ErrClosed
			return
		}
		<-one.done
		if err := one.Items[0].Err; err != nil {
			chosen.Err = err
			return
		}
		if one.Members[0].OK {
			r := &one.Members[0]
			otherLeft := other.Lim.Project(other.State, now).Value
			m.OK, m.RetryAfter, m.Left = true, r.RetryAfter, r.Left+otherLeft
			m.UntilFull = r.UntilFull
			g.mu.Lock()
			g.counts.count(c, true)
			g.mu.Unlock()
			return
		}
	}
	// A split, or the chosen shard no longer suffices: decide exactly.
	a.Write, b.Write = false, false
	g.twoPhase(c)
}
