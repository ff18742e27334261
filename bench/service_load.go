package main

import (
	"context"
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
	"google.golang.org/grpc/credentials/insecure"

	"github.com/seed7fbd42b6/ratelimit/internal/cputime"
)

// serviceValues are the descriptor values the load draws from: "k0" ..
func serviceValues(n int) []string {
	v := make([]string, n)
	for i := range v {
		v[i] = "k" + strconv.Itoa(i)
	}
	return v
}

// loadClient drives one rate limit service: conns gRPC connections, the
// callers sharing them round robin.
type loadClient struct {
	conns   []*grpc.ClientConn
	clients []rlsv3.RateLimitServiceClient
	values  []string
	timeout time.Duration
}

// newLoadClient connects to addr and makes one probe call, which must be
// answered and must match a limit (a service without the rule would
// answer OK to everything, deciding nothing).
func newLoadClient(ctx context.Context, addr string, sc *serviceConfig, values []string) (*loadClient, error) {
	lc := &loadClient{values: values, timeout: sc.timeout}
	for range sc.conns {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			lc.close()
			return nil, err
		}
		lc.conns = append(lc.conns, cc)
		lc.clients = append(lc.clients, rlsv3.NewRateLimitServiceClient(cc))
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := lc.clients[0].ShouldRateLimit(pctx, serviceRequest("probe"))
	if err == nil {
		err = checkProbe(resp)
	}
	if err != nil {
		lc.close()
		return nil, fmt.Errorf("probe call: %w", err)
	}
	return lc, nil
}

// checkProbe verifies that the probe's descriptor matched a counted limit.
func checkProbe(resp *rlsv3.RateLimitResponse) error {
	if len(resp.GetStatuses()) != 1 || resp.Statuses[0].GetCurrentLimit() == nil {
		return fmt.Errorf("the descriptor %s=probe in domain %s matched no limit (answer %v): configure the service with the rule bench -service -v prints",
			serviceKey, serviceDomain, resp)
	}
	return nil
}

func (lc *loadClient) close() {
	for _, cc := range lc.conns {
		cc.Close()
	}
}

// serviceRequest is the load's request: one descriptor of one entry.
func serviceRequest(value string) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Domain: serviceDomain, Descriptors: []*ratelimitv3.RateLimitDescriptor{{
		Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: serviceKey, Value: value}}}}}
}

// serviceRun is one measured run of one service at one caller count.
type serviceRun struct {
	Seconds         float64 `json:"seconds"`
	OK              int64   `json:"ok"`
	OverLimit       int64   `json:"over_limit"`
	Errors          int64   `json:"errors"`
	FirstError      string  `json:"first_error,omitempty"`
	DecisionsPerSec float64 `json:"decisions_per_sec"`
	P50             float64 `json:"p50_ns"`
	P99             float64 `json:"p99_ns"`
	// HarnessCores is the CPU time (user + system) this process, the load
	// generator, spent per second of the measured time; ServiceCores the
	// same of ratelimitd's process (0 for an external service, or where
	// /proc is not there to read).
	HarnessCores float64 `json:"harness_cores"`
	ServiceCores float64 `json:"service_cores,omitempty"`
}

// run drives the service with n callers, each one call at a time with a
// value drawn uniformly at random per call: warmup unmeasured, then dur
// measured. Decisions are the OK and OVER_LIMIT answers of the measured
// time; the latencies are of every call completed in it, failed ones
// included.
// pid, if not 0, is the service's process, whose CPU time is measured.
func (lc *loadClient) run(ctx context.Context, n int, warmup, dur time.Duration, seed uint64, pid int) serviceRun {
	var (
		measuring, stop atomic.Bool
		ok, over, errs  atomic.Int64
		firstErr        atomic.Pointer[string]
		wg              sync.WaitGroup
		lat             = make([][]time.Duration, n)
	)
	for c := range n {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(c)))
			client := lc.clients[c%len(lc.clients)]
			req := serviceRequest("")
			entry := req.Descriptors[0].Entries[0]
			mine := make([]time.Duration, 0, 1<<10)
			for !stop.Load() && ctx.Err() == nil {
				entry.Value = lc.values[rng.IntN(len(lc.values))]
				cctx, cancel := context.WithTimeout(ctx, lc.timeout)
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
	sleepCtx(ctx, warmup)
	measuring.Store(true)
	t0, cpu0, svc0 := time.Now(), cputime.Process(), cputime.Of(pid)
	sleepCtx(ctx, dur)
	measuring.Store(false)
	elapsed, cpu1, svc1 := time.Since(t0), cputime.Process(), cputime.Of(pid)
	stop.Store(true)
	wg.Wait()

	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	r := serviceRun{Seconds: elapsed.Seconds(), OK: ok.Load(), OverLimit: over.Load(), Errors: errs.Load()}
	r.DecisionsPerSec = float64(r.OK+r.OverLimit) / elapsed.Seconds()
	r.P50, r.P99 = nearestRank(all, 0.50), nearestRank(all, 0.99)
	r.HarnessCores = float64(cpu1-cpu0) / float64(elapsed)
	if svc0 > 0 && svc1 > svc0 {
		r.ServiceCores = float64(svc1-svc0) / float64(elapsed)
	}
	if p := firstErr.Load(); p != nil {
		r.FirstError = *p
	}
	if ctx.Err() != nil && r.FirstError == "" {
		r.FirstError = ctx.Err().Error()
	}
	return r
}

// nearestRank is the q-quantile of sorted in ns (nearest rank), 0 if
// empty.
func nearestRank(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(nearestRankOf(q, uint64(len(sorted)))) - 1
	return float64(sorted[min(max(i, 0), len(sorted)-1)])
}

func sleepCtx(ctx context.Context, d time.Duration) {
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
