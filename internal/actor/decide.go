package actor

import "github.com/seed7fbd42b6/ratelimit/internal/bucket"

// decideMember decides one member against its items' current states,
// updating them (and marking them Write) on a grant that writes.
func decideMember(c *Call, m *Member, now int64) {
	a := &c.Items[c.Items[m.First].canon]
	var b *Item
	if m.Second >= 0 {
		b = &c.Items[c.Items[m.Second].canon]
	}
	DecideMember(m, a, b, now)
}

// DecideMember decides m at now against the states of a, its bucket, and b,
// the other shard of a two-choice pair (nil for one bucket): it fills m's
// outputs and, on a grant that writes, updates a.State and b.State and
// sets their Write. A store that keeps buckets elsewhere (redislimit)
// calls it on the states it read, so that both stores fill members alike.
func DecideMember(m *Member, a, b *Item, now int64) {
	if b == nil {
		if m.Op == OpCredit {
			before := a.Lim.Project(a.State, now).Value
			a.State, a.Write = a.Lim.Credit(a.State, now, m.Count), true
			m.OK, m.RetryAfter = true, 0
			m.Left = max(0, m.Count-(a.State.Value-before)) // Spill
			return
		}
		d := a.Lim.Take(a.State, now, m.Count, m.Reserve)
		m.OK, m.RetryAfter = d.OK, d.RetryAfter
		left := d.Next
		if !d.OK {
			left = a.Lim.Project(a.State, now)
		} else if m.Op == OpTake {
			a.State, a.Write = d.Next, true
		}
		m.Left, m.UntilFull = left.Value, a.Lim.UntilFull(left, now)
		return
	}
	pr := a.Lim.TakeTwo(a.State, b.State, now, m.Count, m.Reserve)
	m.OK, m.RetryAfter = pr.OK, pr.RetryAfter
	la, lb := a.Lim.Project(pr.A, now), a.Lim.Project(pr.B, now)
	avg := bucket.State{Value: (la.Value + lb.Value) / 2, TS: max(la.TS, lb.TS)}
	m.Left, m.UntilFull = la.Value+lb.Value, a.Lim.UntilFull(avg, now)
	if pr.OK && m.Op == OpTake {
		if pr.WriteA {
			a.State, a.Write = pr.A, true
		}
		if pr.WriteB {
			b.State, b.Write = pr.B, true
		}
	}
}

// decideAll decides every member in order, each seeing the ones before it,
// and reports whether all were granted. When not, nothing is to be written.
func decideAll(c *Call, now int64) bool {
	if c.decideHook != nil {
		return c.decideHook(c, now)
	}
	all := true
	for i := range c.Members {
		decideMember(c, &c.Members[i], now)
		all = all && c.Members[i].OK
	}
	if !all {
		for i := range c.Items {
			c.Items[i].Write = false
		}
	}
	return all
}
