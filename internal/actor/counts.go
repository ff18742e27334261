package actor

// Counts are decision counters.
type Counts struct {
	Grants, Denials, Reservations uint64
	// Refused counts requests refused because they needed more new
	// buckets than their partition had room for (ErrFull).
	Refused uint64
	Live    int // buckets held in memory
}

// Counts sums the partitions' and coordinators' counters.
func (g *Group) Counts() Counts {
	g.mu.Lock()
	n := g.counts
	g.mu.Unlock()
	for i := range g.parts {
		g.Run(i, func(p *Partition) {
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
