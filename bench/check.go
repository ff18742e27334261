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
	Detail      string  `json:"detail,omitempty"`
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
			for _, i := range w.grants {
				r.counts[i]++
			}
		}
		allowed := d.allowed(elapsed)
		worst := -1
		for i, n := range r.counts {
			if f := float64(n) / allowed; f > ch.MaxFraction {
				ch.MaxFraction, worst = f, i
			}
		}
		if ch.MaxFraction > 1+slack {
			ch.OK = false
			ch.Detail = fmt.Sprintf("limit %q key %q granted %d tokens, allowed %.1f (capacity %g + %g/s x %.3fs + maxReserved %g)",
				d.name, r.wl.keys[worst], r.counts[worst], allowed, d.capacity, d.rate, elapsed.Seconds(), d.maxReserved)
		}
	}
	if d := v.global; d != nil {
		var n int64
		for _, w := range ws {
			n += w.globalGrants
		}
		allowed := d.allowed(elapsed)
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
