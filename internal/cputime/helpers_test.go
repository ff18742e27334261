package cputime

import "testing"

// burn keeps this goroutine's processor busy for tens of milliseconds.
func burn(t *testing.T) {
	x := uint64(1)
	for i := 0; i < 50_000_000; i++ {
		x = x*6364136223846793005 + 1442695040888963407
	}
	if x == 0 {
		t.Log(x) // keep the loop
	}
}
