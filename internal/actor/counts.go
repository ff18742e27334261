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
// group is stopping, it waits for Stop and returns the counts as the
// partitions stopped, so they never go down.
func (g *Group) Counts() Counts {
	stopping := false
	n := g.sum(func(i int, fn func(*Partition)) {
		stopping = !g.Run(i, fn) || stopping
	})
	if !stopping {
		return n
	}
	<-g.stopped
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.final
}

// sum adds the coordinators' counters and each partition's, which visit
// runs on the partition.
func (g *Group) sum(visit func(i int, fn func(*Partition))) Counts {
	g.mu.Lock()
	n := g.counts
	g.mu.Unlock()
	for i := range g.parts {
		visit(i, func(p *Partition) {
			n.Grants += p.counts.Grants
			n.Denials += p.counts.Denials + p.denials.denied()
			n.Reservations += p.counts.Reservations
			n.Refused += p.counts.Refused
			n.Live += p.buckets.len()
		})
	}
	return n
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
