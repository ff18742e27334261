package ratelimit

import (
	"sync/atomic"
	"testing"
)

func TestCallGate(t *testing.T) {
	var g callGate
	waited := 0
	g.waiting = func() { waited++ }
	g.wait() // nothing under way
	if waited != 0 {
		t.Fatalf("wait with no call under way waited")
	}

	// A call under way holds wait; a call that enters once wait has begun
	// does not.
	old := g.enter()
	var late *atomic.Int64
	g.waiting = func() {
		waited++
		late = g.enter()
		old.Add(-1)
	}
	g.wait()
	if waited != 1 {
		t.Fatalf("wait did not wait for the call under way (waited %d times)", waited)
	}
	g.waiting = func() {
		waited++
		late.Add(-1)
	}
	g.wait() // the late call is now the one under way
	if waited != 2 {
		t.Fatalf("the next wait did not wait for the call that entered during the previous one (waited %d times)", waited)
	}
	for e := range g.calls {
		if n := g.calls[e].Load(); n != 0 {
			t.Fatalf("epoch %d counts %d calls after all exited", e, n)
		}
	}
}
