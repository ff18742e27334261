//go:build unix

package cputime

import "testing"

// Work on this goroutine shows up as CPU time, and the reading never goes
// backwards.
func TestProcessCountsWork(t *testing.T) {
	before := Process()
	burn(t)
	after := Process()
	if before <= 0 || after <= before {
		t.Fatalf("CPU time %v before a busy loop, %v after; want positive and growing", before, after)
	}
}
