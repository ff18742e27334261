package actor

import (
	"sync"
	"testing"
)

func TestSpinsFor(t *testing.T) {
	for _, c := range []struct{ procs, want int }{{1, 0}, {2, lockSpins}, {64, lockSpins}} {
		if got := spinsFor(c.procs); got != c.want {
			t.Errorf("spinsFor(%d) = %d, want %d", c.procs, got, c.want)
		}
	}
}

// Group.lock returns holding the mutex, and only once its holder has let
// go, whether it spins or not (a holder that keeps it past the spins is
// waited for).
func TestLockWaitsForTheHolder(t *testing.T) {
	for _, spins := range []int{0, 1, lockSpins} {
		g := &Group{spins: spins}
		var mu sync.Mutex
		mu.Lock()
		written := 0
		got := make(chan int)
		go func() {
			g.lock(&mu)
			got <- written // what the holder wrote before it let go
			mu.Unlock()
		}()
		written = 1
		mu.Unlock()
		if w := <-got; w != 1 {
			t.Errorf("spins %d: lock returned before the holder let go (read %d)", spins, w)
		}
		mu.Lock() // the goroutine let go
		mu.Unlock()
	}
}
