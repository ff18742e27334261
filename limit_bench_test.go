package ratelimit

// Benchmarks of Limit, LimitMany and LimitAll: memory mode at several
// numbers of callers, one hot limit sharded or not, and durable mode
// (group commit).

import (
	"context"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const benchKeys = 1 << 16

var benchKeyNames = func() []string {
	ks := make([]string, benchKeys)
	for i := range ks {
		ks[i] = "user-" + strconv.Itoa(i)
	}
	return ks
}()

func benchLimiter(b *testing.B, path string) *Limiter {
	b.Helper()
	parts, _ := strconv.Atoi(os.Getenv("RL_PARTS"))
	l, err := Open(Options{Path: path, Partitions: parts, Limits: map[string]Config{
		"user": {Kind: TokenBucket, Rate: 1e9, Period: time.Second},
	}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	return l
}

// runCallers runs b's operations as call(i) on (about) par concurrent
// goroutines, reporting allocations; i counts up from a different start
// on each goroutine, so that they spread over the keys.
func runCallers(b *testing.B, par int, call func(i uint64)) {
	var seq atomic.Uint64
	b.ReportAllocs()
	b.SetParallelism((par + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.RunParallel(func(pb *testing.PB) {
		i := seq.Add(1) * 7919
		for pb.Next() {
			i++
			call(i)
		}
	})
}

// BenchmarkLimit is one Limit call per operation, memory mode, at (about)
// the given number of concurrent callers.
func BenchmarkLimit(b *testing.B) {
	for _, par := range []int{1, 16, 256} {
		b.Run("callers="+strconv.Itoa(par), func(b *testing.B) {
			l := benchLimiter(b, "")
			ctx := context.Background()
			runCallers(b, par, func(i uint64) {
				if _, err := l.Limit(ctx, Request{Name: "user", Key: benchKeyNames[i%benchKeys]}); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

// BenchmarkLimitHotAlone is one Limit call per operation on one global
// key from one goroutine, memory mode, with the real clock: at the hot
// limit (denials) most calls repeat a published denial without the
// partition's mutex; at a limit never reached (grants) every call is
// decided under it.
func BenchmarkLimitHotAlone(b *testing.B) {
	for _, c := range []struct {
		name string
		rate float64
	}{{"denials", 500000}, {"grants", 5e8}} {
		b.Run(c.name, func(b *testing.B) {
			l, err := Open(Options{Limits: map[string]Config{
				"global": {Kind: TokenBucket, Rate: c.rate, Period: time.Second, Capacity: c.rate / 10},
			}})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { l.Close() })
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := l.Limit(ctx, Request{Name: "global", Key: "global"}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkLimitHot is one Limit call per operation on one global limit,
// memory mode, 256 callers, unsharded and sharded: what Shards buys a hot
// limit (see actor.Group.Route for the pairing it measures), and what an
// odd count's lone shard costs (4 against 5).
func BenchmarkLimitHot(b *testing.B) {
	for _, shards := range []int{1, 2, 4, 5, 16} {
		b.Run("shards="+strconv.Itoa(shards), func(b *testing.B) {
			l, err := Open(Options{Limits: map[string]Config{
				"global": {Kind: TokenBucket, Rate: 500000, Period: time.Second, Capacity: 50000, Shards: shards},
			}})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { l.Close() })
			ctx := context.Background()
			b.ReportAllocs()
			b.SetParallelism((256 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := l.Limit(ctx, Request{Name: "global"}); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// BenchmarkLimitMany decides 64 requests per call.
func BenchmarkLimitMany(b *testing.B) {
	l := benchLimiter(b, "")
	ctx := context.Background()
	var seq atomic.Uint64
	b.ReportAllocs()
	b.SetParallelism(16)
	b.RunParallel(func(pb *testing.PB) {
		rs := make([]Request, 64)
		out := make([]Decision, 0, 64)
		i := seq.Add(1) * 7919
		for pb.Next() {
			for j := range rs {
				i++
				rs[j] = Request{Name: "user", Key: benchKeyNames[i%benchKeys]}
			}
			out = l.LimitMany(ctx, rs, out)
		}
	})
	b.ReportMetric(float64(b.N*64)/b.Elapsed().Seconds(), "decisions/s")
}

// BenchmarkLimitAll is one LimitAll call of n requests on distinct keys
// per operation, memory mode, one caller: its ns/request should not grow
// with n.
func BenchmarkLimitAll(b *testing.B) {
	for _, n := range []int{2, 64, 4096} {
		b.Run("requests="+strconv.Itoa(n), func(b *testing.B) {
			l := benchLimiter(b, "")
			ctx := context.Background()
			rs := make([]Request, n)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				for j := range rs {
					i++
					rs[j] = Request{Name: "user", Key: benchKeyNames[i%benchKeys]}
				}
				if _, err := l.LimitAll(ctx, rs...); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/request")
		})
	}
}

// BenchmarkLimitAllGlobal is one LimitAll of a per-user and a global
// limit per operation (every call takes the global limit's bucket, so
// callers meet on its partition's mutex), memory mode, at (about) the
// given number of concurrent callers; both limits grant every call.
func BenchmarkLimitAllGlobal(b *testing.B) {
	for _, par := range []int{1, 16, 256} {
		b.Run("callers="+strconv.Itoa(par), func(b *testing.B) {
			l, err := Open(Options{Limits: map[string]Config{
				"user":   {Kind: TokenBucket, Rate: 1e9, Period: time.Second},
				"global": {Kind: TokenBucket, Rate: 1e12, Period: time.Second},
			}})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { l.Close() })
			ctx := context.Background()
			runCallers(b, par, func(i uint64) {
				st, err := l.LimitAll(ctx, Request{Name: "user", Key: benchKeyNames[i%benchKeys]}, Request{Name: "global"})
				if err != nil || !st.OK {
					b.Fatal(st, err)
				}
			})
		})
	}
}

// BenchmarkLimitDurable is one Limit call per operation with every grant
// fsynced before it returns (group commit), at 1, 16, 256 and 1024
// concurrent callers.
func BenchmarkLimitDurable(b *testing.B) {
	for _, callers := range []int{1, 16, 256, 1024} {
		b.Run("callers="+strconv.Itoa(callers), func(b *testing.B) {
			l := benchLimiter(b, b.TempDir()+"/rl.db")
			ctx := context.Background()
			runCallers(b, callers, func(i uint64) {
				if s, err := l.Limit(ctx, Request{Name: "user", Key: benchKeyNames[i%benchKeys]}); err != nil || !s.OK {
					b.Fatal(s, err)
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "grants/s")
		})
	}
}

// BenchmarkLimitDurableOpen is durable Limit under an open load: requests
// arrive at a fixed rate, each on a goroutine of its own, whatever the
// ones before are doing, as a server's requests do (BenchmarkLimitDurable's
// callers instead come back as soon as they are answered). It reports the
// latency quantiles of one call, from when its goroutine is started (so
// waiting for a processor counts); a late arrival is sent at once, so the
// rate holds on average.
func BenchmarkLimitDurableOpen(b *testing.B) {
	for _, rate := range []int{1000, 4000} {
		b.Run("arrivals="+strconv.Itoa(rate), func(b *testing.B) {
			l := benchLimiter(b, b.TempDir()+"/rl.db")
			ctx := context.Background()
			lat := make([]time.Duration, b.N)
			var wg sync.WaitGroup
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for i := range b.N {
				if d := time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(rate))); d > 0 {
					time.Sleep(d)
				}
				wg.Add(1)
				t0 := time.Now()
				go func() {
					defer wg.Done()
					if s, err := l.Limit(ctx, Request{Name: "user", Key: benchKeyNames[i%benchKeys]}); err != nil || !s.OK {
						b.Error(s, err)
					}
					lat[i] = time.Since(t0)
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "arrivals/s")
			slices.Sort(lat)
			for _, q := range []struct {
				name string
				at   float64
			}{{"p50", 0.5}, {"p90", 0.9}, {"p99", 0.99}} {
				b.ReportMetric(float64(lat[int(q.at*float64(len(lat)-1))].Microseconds()), q.name+"-us")
			}
		})
	}
}
