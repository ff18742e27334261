package actor

// Counts are decision counters.
type Counts struct {
	Grants, Denials, Reservations uint64
	// Refused counts requests refused because they needed more new
	// buckets than their partition had room for (ErrFull).
	Refused uint64
	Live    int // buckets held in memory
}

// Counts sums the partitions' and coordinators' counters. Once the
// group is stopping, it waits for Stop and adds the partitions' counts as
// they stopped to the counters calls still under way may add to (the
// coordinators', the lock-free denials), so they never go down.
func (g *Group) Counts() Counts {
	stopping := false
	n := g.sum(func(i int, fn func(*Partition)) {
		stopping = !g.Run(i, fn) || stopping
	})
	if !stopping {
		return g.addLive(n)
	}
	<-g.stopped
	g.mu.Lock()
	n = g.final
	g.mu.Unlock()
	return g.addLive(n)
}

// sum adds up the partitions' own counters, which visit runs on each
// partition.
func (g *Group) sum(visit func(i int, fn func(*Partition))) Counts {
	var n Counts
	for i := range g.parts {
		visit(i, func(p *Partition) {
			n.add(p.counts)
			n.Live += p.buckets.len()
		})
	}
	return n
}

// addLive adds to n the counters updated outside the partitions'
// goroutines: the coordinators' and the denials decided without a
// message.
func (g *Group) addLive(n Counts) Counts {
	g.mu.Lock()
	n.add(g.counts)
	g.mu.Unlock()
	for _, p := range g.parts {
		n.Denials += p.denials.denied()
	}
	return n
}

// add adds c to n, field by field.
func (n *Counts) add(c Counts) {
	n.Grants += c.Grants
	n.Denials += c.Denials
	n.Reservations += c.Reservations
	n.Refused += c.Refused
	n.Live += c.Live
}

// count adds an atomic call's outcome (one decision) to n.
func (n *Counts) count(c *Call, granted bool) {
	if c.uncounted || !writes(c) {
		return
	}
	if !granted {
		n.Denials++
		return
	}
	n.Grants++
	for i := range c.Members {
		if c.Members[i].RetryAfter > 0 {
			n.Reservations++
			return
		}
	}
}

// countOne adds the outcome of one independent member of operation op:
// granted or not and, if granted, whether with a wait (a reservation).
func (n *Counts) countOne(op Op, ok, waits bool) {
	switch {
	case op != OpTake:
	case !ok:
		n.Denials++
	case waits:
		n.Grants++
		n.Reservations++
	default:
		n.Grants++
	}
}
