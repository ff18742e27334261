package actor

import "sync"

// lockSpins bounds how many times Group.lock tries a taken mutex before it
// waits on it: about a microsecond of trying.
const lockSpins = 1024

// spinsFor returns the tries Group.lock makes when Go runs goroutines on
// procs processors, read once, when the group is made: none on one, where
// the holder cannot run while a waiter spins.
func spinsFor(procs int) int {
	if procs < 2 {
		return 0
	}
	return lockSpins
}

// lock locks mu, a partition's mutex, first trying it up to g.spins times.
// A partition's mutex is held to queue a message or take the executor
// token (enter), or for one call's decision on that partition (with a
// log, a lone request's, and the append of its records under the log's
// mutex), and waited for while others are held only in partition order
// (lockRanges), so its holder, running on another processor, lets
// go sooner than a waiter parked on the mutex is woken again; sync.Mutex
// itself does not spin while other goroutines wait to run, which under
// load they always do.
func (g *Group) lock(mu *sync.Mutex) {
	for range g.spins {
		if mu.TryLock() {
			return
		}
	}
	if g.lockHook != nil {
		g.lockHook()
	}
	mu.Lock()
}
