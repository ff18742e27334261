package redislimit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed7fbd42b6/ratelimit"
	"github.com/seed7fbd42b6/ratelimit/internal/cputime"
	"github.com/seed7fbd42b6/ratelimit/internal/redistest"
)

// Benchmarks of this store on one redis-server (started here, on
// loopback TCP, appendfsync always), at several caller counts. Each
// reports decisions/s, the p99 latency of a call and the CPU a decision
// costs the server and this process:
//
//	go test -run '^$' -bench . -benchtime 3s -count 3 ./redislimit
//
// The harness compares them with go-redis/redis_rate on the same server
// and keys (go run ./bench -mode redis -baselines redis_rate).
//
// Drive is the plain driver the benchmarks use (callers goroutines for a
// duration), for the benchmark harness.

// DriveResult is what Drive measured.
type DriveResult struct {
	Calls, Decisions, Errors int
	Elapsed                  time.Duration
	Latencies                []time.Duration // one per call, unsorted
}

// PerSecond is decisions per second.
func (r DriveResult) PerSecond() float64 { return float64(r.Decisions) / r.Elapsed.Seconds() }

// P99 is the 99th percentile call latency.
func (r DriveResult) P99() time.Duration {
	if len(r.Latencies) == 0 {
		return 0
	}
	l := slices.Clone(r.Latencies)
	slices.Sort(l)
	return l[len(l)*99/100]
}

// Drive runs callers goroutines, each calling op in a loop until d has
// passed (or calls have been made in all, if calls > 0), and returns the
// calls, the decisions they report and their latencies. op gets its
// caller's index and a random source of its own.
func Drive(callers int, d time.Duration, calls int, op func(ctx context.Context, caller int, rng *rand.Rand) (decisions int, err error)) DriveResult {
	ctx := context.Background()
	var wg sync.WaitGroup
	var next atomic.Int64
	lat := make([][]time.Duration, callers)
	dec := make([]int, callers)
	errs := make([]int, callers)
	start := time.Now()
	deadline := start.Add(d)
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), 1))
			for {
				if calls > 0 {
					if next.Add(1) > int64(calls) {
						return
					}
				} else if time.Now().After(deadline) {
					return
				}
				t := time.Now()
				n, err := op(ctx, c, rng)
				lat[c] = append(lat[c], time.Since(t))
				dec[c] += n
				if err != nil {
					errs[c]++
				}
			}
		}()
	}
	wg.Wait()
	r := DriveResult{Elapsed: time.Since(start)}
	for c := range callers {
		r.Calls += len(lat[c])
		r.Decisions += dec[c]
		r.Errors += errs[c]
		r.Latencies = append(r.Latencies, lat[c]...)
	}
	return r
}

// benchServer is the benchmarks' redis-server.
var benchServer struct {
	once sync.Once
	s    *server
	err  error
}

func benchClient(b *testing.B, pool int) *redis.Client {
	redistest.Need(b)
	benchServer.once.Do(func() {
		dir, err := os.MkdirTemp("", "redislimit-bench") // b.TempDir is removed at the end of this benchmark
		if err != nil {
			benchServer.err = err
			return
		}
		sharedDirs = append(sharedDirs, dir)
		benchServer.s, benchServer.err = startServer(dir, false, strings.Fields(os.Getenv("RL_SERVER_ARGS"))...)
		if benchServer.err == nil {
			fmt.Printf("redislimit: benchmarks on redis-server %s (appendonly yes, appendfsync always) in %s\n", benchServer.s.Addr(), dir)
		}
	})
	if benchServer.err != nil {
		b.Fatal(benchServer.err)
	}
	c := redis.NewClient(&redis.Options{Addr: benchServer.s.Addr(), PoolSize: pool, ReadTimeout: 10 * time.Second})
	b.Cleanup(func() { c.Close() })
	return c
}

const benchKeys = 10000

var benchCallers = []int{1, 16, 256, 1024}

// benchLimit is generous enough that most requests are granted.
var benchLimit = ratelimit.Config{Kind: ratelimit.TokenBucket, Rate: 1000, Period: S, Capacity: 1000}

func runDrive(b *testing.B, callers int, op func(ctx context.Context, caller int, rng *rand.Rand) (int, error)) {
	b.ReportAllocs()
	redis0, self0 := cputime.Of(benchServer.s.Pid()), cputime.Process()
	b.ResetTimer()
	r := Drive(callers, 0, max(b.N, callers), op)
	b.StopTimer()
	redisCPU, goCPU := cputime.Of(benchServer.s.Pid())-redis0, cputime.Process()-self0
	b.ReportMetric(r.PerSecond(), "decisions/s")
	b.ReportMetric(float64(r.P99().Microseconds()), "p99-us")
	// CPU per decision, of the server and of this process: what a
	// decision costs, whatever else runs on the machine.
	b.ReportMetric(float64(redisCPU.Microseconds())/float64(r.Decisions), "server-cpu-us/decision")
	b.ReportMetric(float64(goCPU.Microseconds())/float64(r.Decisions), "client-cpu-us/decision")
	if r.Errors > 0 {
		b.Fatalf("%d errors", r.Errors)
	}
}

func benchKey(rng *rand.Rand) string { return fmt.Sprint("user:", rng.IntN(benchKeys)) }

func BenchmarkLimit(b *testing.B) {
	for _, callers := range benchCallers {
		b.Run(fmt.Sprintf("callers=%d/redislimit", callers), func(b *testing.B) {
			c := benchClient(b, 64)
			l := open(b, c, ratelimit.Options{Limits: map[string]ratelimit.Config{"user": benchLimit}}, benchOptions()...)
			runDrive(b, callers, func(ctx context.Context, _ int, rng *rand.Rand) (int, error) {
				_, err := l.Limit(ctx, ratelimit.Request{Name: "user", Key: benchKey(rng)})
				return 1, err
			})
		})
	}
}

// BenchmarkLimitMany decides 64 requests per call.
func BenchmarkLimitMany(b *testing.B) {
	const batch = 64
	for _, callers := range benchCallers {
		b.Run(fmt.Sprintf("callers=%d/redislimit", callers), func(b *testing.B) {
			c := benchClient(b, 64)
			l := open(b, c, ratelimit.Options{Limits: map[string]ratelimit.Config{"user": benchLimit}}, benchOptions()...)
			runDrive(b, callers, func(ctx context.Context, _ int, rng *rand.Rand) (int, error) {
				rs := make([]ratelimit.Request, batch)
				for i := range rs {
					rs[i] = ratelimit.Request{Name: "user", Key: benchKey(rng)}
				}
				for _, d := range l.LimitMany(ctx, rs, nil) {
					if d.Err != nil {
						return batch, d.Err
					}
				}
				return batch, nil
			})
		})
	}
}

// BenchmarkLimitAll takes from a per-user and a global limit at once.
func BenchmarkLimitAll(b *testing.B) {
	for _, callers := range benchCallers {
		b.Run(fmt.Sprintf("callers=%d/redislimit", callers), func(b *testing.B) {
			c := benchClient(b, 64)
			l := open(b, c, ratelimit.Options{Limits: map[string]ratelimit.Config{"user": benchLimit,
				"global": {Kind: ratelimit.TokenBucket, Rate: 1e9, Period: S, Capacity: 1e9}}}, benchOptions()...)
			runDrive(b, callers, func(ctx context.Context, _ int, rng *rand.Rand) (int, error) {
				_, err := l.LimitAll(ctx, ratelimit.Request{Name: "user", Key: benchKey(rng)}, ratelimit.Request{Name: "global"})
				return 1, err
			})
		})
	}
}

// benchOptions are the store's settings from the environment, for
// experiments: RL_ROUNDS (rounds in flight), RL_NOMERGE=1 (a program per
// tag on a single server too).
func benchOptions() []Option {
	var o []Option
	if n, _ := strconv.Atoi(os.Getenv("RL_ROUNDS")); n > 0 {
		o = append(o, withRounds(n))
	}
	if os.Getenv("RL_NOMERGE") != "" {
		o = append(o, withoutMerge())
	}
	return o
}
