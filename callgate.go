package ratelimit

import (
	"sync/atomic"
	"time"

	"github.com/seed7fbd42b6/ratelimit/internal/actor"
)

// callGate counts the calls under way on a shared store (Redis), from
// before they resolve their limits until the store is done with them (see
// gateHold), so
// that SetLimits can wait for every call that may still write a bucket
// under the limits it replaced before it moves the buckets' expiries to
// the new ones (a store whose keys expire by the limit they were written
// under: see store.Relimiter). The in-process partitions need no gate:
// they relimit a bucket whenever it is stored.
//
// A call counts itself on the current epoch's counter (and again on the
// new one if the epoch moved meanwhile); wait moves to the other epoch
// and waits for the old counter to drain. A call that wait did not see
// found the new epoch after counting itself, so it resolves its limits
// after SetLimits stored the new ones. The zero value is ready to use;
// enter, and leaving, are safe for concurrent use; wait is called by one
// goroutine at a time.
type callGate struct {
	epoch atomic.Uint32
	calls [2]atomic.Int64
	// waiting, set by tests, is called once whenever wait finds calls
	// still under way.
	waiting func()
}

// enter counts a call that is about to resolve its limits and returns
// the count it is in; the call leaves by decrementing it.
func (g *callGate) enter() *atomic.Int64 {
	for {
		e := g.epoch.Load() & 1
		g.calls[e].Add(1)
		if g.epoch.Load()&1 == e {
			return &g.calls[e]
		}
		g.calls[e].Add(-1)
	}
}

// gateHold is a call's place in its limiter's gate, if it has one: held
// from before the call resolves its limits until it returns, or, once
// handed to the call's actor.Call, until the store releases that (an
// abandoned call may still write after its caller has returned).
type gateHold struct{ n *atomic.Int64 }

// holdGate enters l's gate, if it has one.
func (l *Limiter) holdGate() gateHold {
	if l.gate == nil {
		return gateHold{}
	}
	return gateHold{l.gate.enter()}
}

// hand passes the hold to c, which ends it when it is released.
func (h *gateHold) hand(c *actor.Call) {
	if h.n != nil {
		c.Hold(h.n)
		h.n = nil
	}
}

// drop ends the hold unless it was handed on.
func (h *gateHold) drop() {
	if h.n != nil {
		h.n.Add(-1)
		h.n = nil
	}
}

// wait returns once every call that entered before it began has left.
// Calls wait only for their store, so this is bounded by the store's own
// timeouts.
func (g *callGate) wait() {
	old := (g.epoch.Add(1) - 1) & 1
	if g.calls[old].Load() == 0 {
		return
	}
	if g.waiting != nil {
		g.waiting()
	}
	for g.calls[old].Load() != 0 {
		time.Sleep(100 * time.Microsecond)
	}
}
