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
		prior, next := takeOne(m, a, now)
		describeOne(m, a.Lim, prior, next, now)
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

// takeOne decides m, a take or check of bucket a alone, at now: it sets
// m.OK and, on a granted take, a's new state (and Write). It returns a's
// state before and after the take, for describeOne; m.RetryAfter, Left
// and UntilFull are left to it.
func takeOne(m *Member, a *Item, now int64) (prior, next bucket.State) {
	prior = a.State
	next, m.OK = a.Lim.Try(prior, now, m.Count, m.Reserve)
	if m.OK && m.Op == OpTake {
		a.State, a.Write = next, true
	}
	return prior, next
}

// describeOne fills the outputs of m that takeOne left (RetryAfter, Left,
// UntilFull) from the states it returned: arithmetic on values only, which
// a partition's caller runs after releasing its mutex.
func describeOne(m *Member, l *bucket.Limit, prior, next bucket.State, now int64) {
	describe(m, l, prior, next, now, -1)
}

// describe is describeOne given a denial's wait when it is known (retry
// >= 0), so that it is not worked out again.
func describe(m *Member, l *bucket.Limit, prior, next bucket.State, now, retry int64) {
	left := next
	if !m.OK {
		left = l.Project(prior, now)
	}
	if m.OK || retry < 0 {
		retry = l.Wait(prior, left, m.OK, now, m.Count, m.Reserve)
	}
	m.RetryAfter = retry
	m.Left, m.UntilFull = left.Value, l.UntilFullProjected(left, now)
}

// undescribed is what decideSingle leaves of a take or a check: the
// states describeOne works out the member's other outputs from, and, when
// known, the reading from which a denied request is granted (a published
// denial's, see denial.go). Its zero value leaves nothing (a refusal, a
// credit).
type undescribed struct {
	lim         *bucket.Limit
	prior, next bucket.State
	now         int64
	grantAt     int64 // valid when timed
	timed       bool
}

// finish fills m's outputs that decideSingle left, if any.
func (u *undescribed) finish(m *Member) {
	if u.lim == nil {
		return
	}
	retry := int64(-1) // describe uses it only for a denial
	if u.timed && u.grantAt > u.now {
		retry = u.grantAt - u.now
	}
	describe(m, u.lim, u.prior, u.next, u.now, retry)
}

// RepeatsWait is when an atomic call that was denied, and whose members
// name one bucket more than once, is granted at the earliest: the least
// wait after which members (all of c's when nil; indexes into c.Members),
// replayed in order on the buckets' states before the call (prior, by the
// canonical item canon(i) of item i), are each granted after the ones
// before it; a member of two shards counts with its own RetryAfter, which
// does not see the members before it (an estimate: a retry may draw other
// shards). A replay at now gives the estimate (a denied take of one bucket
// is taken all the same, into any debt, so that the members after it on
// its bucket wait for it too), and replays at later readings make it
// exact, as Wait is for one request. It marks the members InWait; their
// other outputs are left as decided.
func RepeatsWait(c *Call, members []int32, canon func(int32) int32, prior []bucket.State, now int64) int64 {
	state := make([]bucket.State, len(prior))
	guess, sharded := int64(0), int64(0) // estimate's waits: of the replayed members, of the sharded ones
	// replay decides the members at t from prior and reports whether all
	// were granted; with estimate, it also takes the waits.
	replay := func(t int64, estimate bool) (all bool) {
		copy(state, prior)
		all = true
		one := func(m *Member) {
			if estimate {
				m.InWait = true
			}
			if m.Second >= 0 {
				if estimate && !m.OK {
					sharded = max(sharded, m.RetryAfter)
				}
				return
			}
			a := canon(m.First)
			lim, s := c.Items[a].Lim, state[a]
			if m.Op == OpCredit {
				state[a] = lim.Credit(s, t, m.Count)
				return
			}
			next, ok := lim.Try(s, t, m.Count, m.Reserve)
			if !ok {
				all = false
				if estimate {
					guess = max(guess, lim.Wait(s, lim.Project(s, t), false, t, m.Count, m.Reserve))
				}
			}
			if m.Op == OpTake {
				state[a] = next // Try's state: taken, into any debt, granted or not
			}
		}
		if members == nil {
			for i := range c.Members {
				one(&c.Members[i])
			}
		} else {
			for _, i := range members {
				one(&c.Members[i])
			}
		}
		return all
	}
	replay(now, true)
	wait := bucket.Settle(guess, func(d int64) bool { return replay(bucket.After(now, d), false) })
	return max(wait, sharded)
}

// decideAll decides every member in order, each seeing the ones before it,
// and reports whether all were granted. When not, nothing is to be written.
func decideAll(c *Call, now int64) bool {
	if c.decideHook != nil {
		return c.decideHook(c, now)
	}
	c.Wait = 0               // a call decided again (see Group.decideDenied) starts afresh
	var prior []bucket.State // the buckets before the call, when one repeats (see RepeatsWait)
	for i := range c.Items {
		if c.Items[i].canon != int32(i) {
			prior = c.States()
			break
		}
	}
	all := true
	for i := range c.Members {
		c.Members[i].InWait = false
		decideMember(c, &c.Members[i], now)
		all = all && c.Members[i].OK
	}
	if !all && prior != nil {
		c.Wait = RepeatsWait(c, nil, func(i int32) int32 { return c.Items[i].canon }, prior, now)
	}
	if !all {
		for i := range c.Items {
			c.Items[i].Write = false
		}
	}
	return all
}
