package main

import (
	"fmt"
	"time"
)

// check is the admitted-token check of one cell: the correctness test every
// run makes, and the one whose failure makes the exit status 1.
type check struct {
	OK          bool    `json:"ok"`
	MaxFraction float64 `json:"max_fraction_of_allowed"` // most-used bucket's grants / allowance
	// Exercised: some limit was asked for more tokens than it allows in
	// the cell (the hottest key, or the global limit), so an
	// implementation that over-admits could fail the check. A cell too
	// slow for that passes whatever the implementation grants.
	Exercised bool   `json:"exercised"`
	Detail    string `json:"detail,omitempty"`
}

// check verifies that no key and no global limit was granted more tokens
// than its token bucket allows between the workers' release and the end of
// the cell (see limitDef.allowed; every grant falls in that span, and
// counting from Open would loosen the bound by the time Open takes), and
// reports the highest fraction of the allowance any bucket used.
func (r *runner) check(c *cell, v *variant, ws []*worker, elapsed time.Duration) check {
	ch := check{OK: true}
	const slack = 1e-9
	if d := c.sc.perKey; d != nil {
		clear(r.counts)
		for _, w := range ws {
			for _, log := range w.grantLogs() {
				for _, i := range log {
					r.counts[i]++
				}
			}
		}
		allowed := d.allowed(elapsed)
		worst := -1
		for i, n := range r.counts {
			if f := float64(n) / allowed; f > ch.MaxFraction {
				ch.MaxFraction, worst = f, i
			}
		}
		ch.Exercised = float64(r.demand(ws, hottestKey)) > allowed
		if ch.MaxFraction > 1+slack {
			ch.OK = false
			ch.Detail = fmt.Sprintf("limit %q key %q granted %d tokens, allowed %.1f (capacity %g + %g/s x %.3fs + maxReserved %g)",
				d.name, r.wl.keys[worst], r.counts[worst], allowed, d.capacity, d.rate, elapsed.Seconds(), d.maxReserved)
		}
	}
	if d := v.global; d != nil {
		var n, asked int64
		for _, w := range ws {
			n += w.globalGrants
			asked += w.calls // every call of a scenario with a global limit asks it for one token
		}
		allowed := d.allowed(elapsed)
		ch.Exercised = ch.Exercised || float64(asked) > allowed
		f := float64(n) / allowed
		ch.MaxFraction = max(ch.MaxFraction, f)
		if f > 1+slack {
			ch.OK = false
			if ch.Detail != "" {
				ch.Detail += "; "
			}
			ch.Detail += fmt.Sprintf("limit %q granted %d tokens, allowed %.1f (capacity %g + %g/s x %.3fs)",
				d.name, n, allowed, d.capacity, d.rate, elapsed.Seconds())
		}
	}
	return ch
}

// hottestKey is the key index the Zipf stream draws most often (rank 0).
const hottestKey = 0

// demand is how many requests ws made for key index k: the occurrences of
// k in the stream positions each worker read.
func (r *runner) demand(ws []*worker, k uint32) int64 {
	var n int64
	for _, w := range ws {
		for p := r.wl.startPos(w.id); p != w.pos; p++ {
			if r.wl.stream[p&r.wl.mask] == k {
				n++
			}
		}
	}
	return n
}
