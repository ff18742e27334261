//go:build unix

package cputime

import "testing"

// Work on this goroutine shows up as CPU time, and the reading never goes
// backwards.
func TestProcessCountsWork(t *testing.T) {
	before := Process()
	x := uint64(1)
	for i := 0; i < 50_000_000; i++ {
		x = x*6364136223846793005 + 1442695040888963407
	}
	after := Process()
	if x == 0 {
		t.Log(x) // keep the loop
	}
	if before <= 0 || after <= before {
		t.Fatalf("CPU time %v before a busy loop, %v after; want positive and growing", before, after)
	}
}
