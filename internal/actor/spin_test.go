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

// Group.lock on a taken mutex tries it, then waits for it: it returns
// holding it, only once its holder has let go, whatever its tries.
func TestLockWaitsForTheHolder(t *testing.T) {
	for _, spins := range []int{0, 1, lockSpins} {
		waiting := make(chan struct{})
		g := &Group{spins: spins, lockHook: func() { close(waiting) }}
		var mu sync.Mutex
		mu.Lock()
		written := 0
		got := make(chan int)
		go func() {
			g.lock(&mu)
			got <- written // what the holder wrote before it let go
			mu.Unlock()
		}()
		<-waiting // its tries all failed: the mutex is still held
		written = 1
		mu.Unlock()
		if w := <-got; w != 1 {
			t.Errorf("spins %d: lock returned before the holder let go (read %d)", spins, w)
		}
		mu.Lock() // the goroutine let go
		mu.Unlock()
	}
}

// Group.lock on a free mutex takes it on its first try, without waiting.
func TestLockTakesAFreeMutex(t *testing.T) {
	g := &Group{spins: lockSpins, lockHook: func() { t.Error("lock waited for a free mutex") }}
	var mu sync.Mutex
	g.lock(&mu)
	if mu.TryLock() {
		t.Fatal("lock returned without the mutex")
	}
	mu.Unlock()
}

// BenchmarkLockTries is the tries Group.lock makes on a taken mutex before
// it waits for it (the doc's "about a microsecond"), per operation.
func BenchmarkLockTries(b *testing.B) {
	var mu sync.Mutex
	mu.Lock()
	b.ReportAllocs()
	for b.Loop() {
		for range lockSpins {
			if mu.TryLock() {
				b.Fatal("a taken mutex was taken")
			}
		}
	}
}
