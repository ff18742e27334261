package ratelimit

import (
	"sync/atomic"
	"time"
)

// callGate counts the calls under way on a shared store (Redis), from
// before they resolve their limits until the store has decided them, so
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
// enter and exit are safe for concurrent use, wait is called by one
// goroutine at a time.
type callGate struct {
	epoch atomic.Uint32
	calls [2]atomic.Int64
	// waiting, set by tests, is called once whenever wait finds calls
	// still under way.
	waiting func()
}

// enter counts a call that is about to resolve its limits; it returns
// what exit needs.
func (g *callGate) enter() uint32 {
	for {
		e := g.epoch.Load() & 1
		g.calls[e].Add(1)
		if g.epoch.Load()&1 == e {
			return e
		}
		g.calls[e].Add(-1)
	}
}

// exit ends a call that enter counted.
func (g *callGate) exit(e uint32) { g.calls[e].Add(-1) }

// wait returns once every call that entered before it began has exited.
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
