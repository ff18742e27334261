package redislimit

import "github.com/seed7fbd42b6/ratelimit/internal/actor"

// planIndependent makes one part per tag of c's members, each decided on
// its own (c is not atomic: one item per member), except those whose item
// already failed; it returns how many it planned.
func (j *job) planIndependent() int {
	c := j.c
	var count, start [Slots]int32
	n := 0
	for m := range c.Members {
		if it := &c.Items[c.Members[m].First]; it.Err == nil {
			count[it.Part]++
			n++
		}
	}
	j.dms = grow(j.dms, n)
	j.parts = j.parts[:0]
	at := int32(0)
	for t := range count {
		start[t] = at
		for lo := at; lo < at+count[t]; lo += maxProgramItems {
			p := j.addPart(int32(t), unitDecide)
			p.lo, p.hi = lo, min(lo+maxProgramItems, at+count[t])
		}
		at += count[t]
	}
	for m := range c.Members {
		a := c.Members[m].First
		if c.Items[a].Err != nil {
			continue
		}
		t := c.Items[a].Part
		j.dms[start[t]] = dmember{m: int32(m), a: a, b: -1}
		start[t]++
	}
	return n
}

// planAtomic makes one part deciding all of c's members, whose items
// share one tag, granted all or none.
func (j *job) planAtomic() {
	c := j.c
	j.dms = grow(j.dms, len(c.Members))
	for m := range c.Members {
		mem := &c.Members[m]
		j.dms[m] = dmember{m: int32(m), a: mem.First, b: mem.Second}
	}
	j.setCanon()
	p := j.addPart(c.Items[0].Part, unitDecide)
	p.atomic, p.lo, p.hi = true, 0, int32(len(c.Members))
}

// planPeek makes one peek part per tag of c's items; canon (for a
// read-only decision afterwards) if decide.
func (j *job) planPeek(decide bool) {
	if decide {
		j.setCanon()
	}
	j.planItems(unitPeek)
}

// planItems makes one part of kind per tag of c's items.
func (j *job) planItems(kind uint8) {
	c := j.c
	var count, start [Slots]int32
	for i := range c.Items {
		count[c.Items[i].Part]++
	}
	j.its = grow(j.its, len(c.Items))
	j.parts = j.parts[:0]
	n := int32(0)
	for t := range count {
		start[t] = n
		if count[t] > 0 {
			p := j.addPart(int32(t), kind)
			p.lo, p.hi = n, n+count[t]
		}
		n += count[t]
	}
	for i := range c.Items {
		t := c.Items[i].Part
		j.its[start[t]] = int32(i)
		start[t]++
	}
}

// setCanon points every item at the first item naming the same bucket,
// whose state the members deciding on either share (as the partitions
// merge repeated buckets of an atomic call).
func (j *job) setCanon() {
	n := len(j.c.Items)
	if n > 16 {
		first := make(map[string]int32, n)
		for i := range n {
			if f, ok := first[j.keys[i]]; ok {
				j.canon[i] = f
			} else {
				first[j.keys[i]] = int32(i)
				j.canon[i] = int32(i)
			}
		}
		return
	}
	for i := range n {
		j.canon[i] = int32(i)
		for k := range i {
			if j.keys[k] == j.keys[i] {
				j.canon[i] = j.canon[k]
				break
			}
		}
	}
}

// decideRead decides a call that writes nothing (checks) on the states
// its peek parts read, at the latest of their clock readings.
func (j *job) decideRead() {
	c := j.c
	var now int64
	for i := range j.parts {
		if j.parts[i].err != nil {
			return
		}
		now = max(now, j.parts[i].now)
	}
	for m := range c.Members {
		mem := &c.Members[m]
		j.decideMember(mem, mem.First, mem.Second, now)
	}
}

// decideMember decides mem on the canonical items of a and b (b < 0: one
// bucket).
func (j *job) decideMember(mem *actor.Member, a, b int32, now int64) {
	c := j.c
	var ib *actor.Item
	if b >= 0 {
		ib = &c.Items[j.canon[b]]
	}
	actor.DecideMember(mem, &c.Items[j.canon[a]], ib, now)
}
