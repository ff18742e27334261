package main

import (
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/time/rate"
)

// stripedKeys are BenchmarkStripedRate's keys, named as the ratelimit
// package's benchmarks name theirs.
var stripedKeys = func() []string {
	ks := make([]string, 1<<16)
	for i := range ks {
		ks[i] = "user-" + strconv.Itoa(i)
	}
	return ks
}()

// BenchmarkStripedRate is the baseline people hand-roll: a map of
// x/time/rate limiters behind 64 striped mutexes, at 256 callers over
// 65,536 keys, as the ratelimit package's BenchmarkLimit/callers=256.
func BenchmarkStripedRate(b *testing.B) {
	type stripe struct {
		sync.Mutex
		m map[string]*rate.Limiter
		_ [40]byte
	}
	var stripes [64]stripe
	for i := range stripes {
		stripes[i].m = make(map[string]*rate.Limiter)
	}
	var seq atomic.Uint64
	b.ReportAllocs()
	b.SetParallelism((256 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.RunParallel(func(pb *testing.PB) {
		i := seq.Add(1) * 7919
		for pb.Next() {
			i++
			k := stripedKeys[i%uint64(len(stripedKeys))]
			s := &stripes[i%64]
			s.Lock()
			lim, ok := s.m[k]
			if !ok {
				lim = rate.NewLimiter(1e9, 1e9)
				s.m[k] = lim
			}
			lim.Allow()
			s.Unlock()
		}
	})
}
