package loadgen

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// Options describe one run. Zero fields mean the defaults noted.
type Options struct {
	Addr     string        // the service's gRPC address; required
	Callers  int           // concurrent callers, each one call at a time; 0 means 1
	Duration time.Duration // measured time; 0 means 5s
	Warmup   time.Duration // unmeasured time before it; 0 means none
	Conns    int           // gRPC connections the callers share; 0 means 4
	Timeout  time.Duration // per call; 0 means 5s
	Domain   string        // 0 means "bench"
	Key      string        // the descriptors' entry key; "" means "key"
	// Keys is the number of distinct values, drawn uniformly at random
	// per descriptor; 0 means 100000.
	Keys int
	// Descriptors per request; 0 means 1.
	Descriptors int
	// Hits is the request's hits_addend; 0 leaves it unset (1).
	Hits uint32
	Seed uint64
	// TLS, when set, connects with it.
	TLS *tls.Config
}

func (o Options) withDefaults() Options {
	o.Callers = max(o.Callers, 1)
	if o.Duration <= 0 {
		o.Duration = 5 * time.Second
	}
	if o.Conns <= 0 {
		o.Conns = 4
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	if o.Domain == "" {
		o.Domain = "bench"
	}
	if o.Key == "" {
		o.Key = "key"
	}
	if o.Keys <= 0 {
		o.Keys = 100000
	}
	o.Descriptors = max(o.Descriptors, 1)
	return o
}

// Result is one run's outcome.
type Result struct {
	Callers int
	// Decisions are the answers (OK and OVER_LIMIT) in the measured time;
	// Errors the calls that failed.
	Decisions, OK, OverLimit, Errors int64
	FirstError                       string
	Elapsed                          time.Duration
	PerSecond                        float64
	// P50 and P99 are latency percentiles of the measured calls, failed
	// ones included.
	P50, P99 time.Duration
}

// Run drives the service with o.Callers callers for o.Warmup, then
// measures for o.Duration. It fails before measuring if a first call
// fails.
func Run(ctx context.Context, o Options) (Result, error) {
	o = o.withDefaults()
	if o.Addr == "" {
		return Result{}, errors.New("loadgen: no address")
	}
	creds := insecure.NewCredentials()
	if o.TLS != nil {
		creds = credentials.NewTLS(o.TLS)
	}
	clients := make([]rlsv3.RateLimitServiceClient, o.Conns)
	for i := range clients {
		cc, err := grpc.NewClient(o.Addr, grpc.WithTransportCredentials(creds))
		if err != nil {
			return Result{}, fmt.Errorf("loadgen: %w", err)
		}
		defer cc.Close()
		clients[i] = rlsv3.NewRateLimitServiceClient(cc)
	}
	values := make([]string, o.Keys)
	for i := range values {
		values[i] = "k" + strconv.Itoa(i)
	}
	probe, cancel := context.WithTimeout(ctx, o.Timeout)
	_, err := clients[0].ShouldRateLimit(probe, request(o, values[:1]))
	cancel()
	if err != nil {
		return Result{}, fmt.Errorf("loadgen: probe call: %w", err)
	}

	var (
		measuring, stop atomic.Bool
		ok, over, errs  atomic.Int64
		firstErr        atomic.Pointer[string]
		wg              sync.WaitGroup
		lat             = make([][]time.Duration, o.Callers)
	)
	for c := range o.Callers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(o.Seed, uint64(c)))
			client := clients[c%len(clients)]
			req := request(o, values[:1])
			mine := make([]time.Duration, 0, 1<<12)
			for !stop.Load() && ctx.Err() == nil {
				for _, d := range req.Descriptors {
					d.Entries[0].Value = values[rng.IntN(len(values))]
				}
				cctx, cancel := context.WithTimeout(ctx, o.Timeout)
				t0 := time.Now()
				resp, err := client.ShouldRateLimit(cctx, req)
				took := time.Since(t0)
				cancel()
				if !measuring.Load() {
					continue
				}
				mine = append(mine, took)
				switch {
				case err != nil:
					errs.Add(1)
					s := err.Error()
					firstErr.CompareAndSwap(nil, &s)
				case resp.OverallCode == rlsv3.RateLimitResponse_OK:
					ok.Add(1)
				default:
					over.Add(1)
				}
			}
			lat[c] = mine
		})
	}
	sleep(ctx, o.Warmup)
	measuring.Store(true)
	start := time.Now()
	sleep(ctx, o.Duration)
	measuring.Store(false)
	elapsed := time.Since(start)
	stop.Store(true)
	wg.Wait()

	r := Result{Callers: o.Callers, OK: ok.Load(), OverLimit: over.Load(), Errors: errs.Load(), Elapsed: elapsed}
	r.Decisions = r.OK + r.OverLimit
	r.PerSecond = float64(r.Decisions) / elapsed.Seconds()
	if p := firstErr.Load(); p != nil {
		r.FirstError = *p
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	r.P50, r.P99 = percentile(all, 0.50), percentile(all, 0.99)
	return r, ctx.Err()
}

// request builds a request of o.Descriptors descriptors of one entry.
func request(o Options, values []string) *rlsv3.RateLimitRequest {
	req := &rlsv3.RateLimitRequest{Domain: o.Domain, HitsAddend: o.Hits}
	for range o.Descriptors {
		req.Descriptors = append(req.Descriptors, &ratelimitv3.RateLimitDescriptor{
			Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: o.Key, Value: values[0]}}})
	}
	return req
}

// percentile is the q-quantile of sorted (nearest rank), 0 if empty.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// Summary is the medians over several runs of one caller count.
type Summary struct {
	Callers   int
	PerSecond float64
	P50, P99  time.Duration
	Runs      []Result
}

// Summarize takes the median of each figure over runs (of one caller
// count).
func Summarize(runs []Result) Summary {
	s := Summary{Runs: runs}
	if len(runs) == 0 {
		return s
	}
	s.Callers = runs[0].Callers
	s.PerSecond = median(runs, func(r Result) float64 { return r.PerSecond })
	s.P50 = time.Duration(median(runs, func(r Result) float64 { return float64(r.P50) }))
	s.P99 = time.Duration(median(runs, func(r Result) float64 { return float64(r.P99) }))
	return s
}

func median(runs []Result, f func(Result) float64) float64 {
	v := make([]float64, len(runs))
	for i, r := range runs {
		v[i] = f(r)
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}
