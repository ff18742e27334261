package server

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/seed7fbd42b6/ratelimit/cmd/ratelimitd/internal/engine"
)

// healthServices are the names gRPC health reports: the server as a
// whole, envoyproxy/ratelimit's name, and the RLS service.
var healthServices = []string{"", "ratelimit", rlsServiceName}

// healthState is whether the server should receive requests: not once it
// drains, nor while the limiter cannot decide (a file or memory limiter
// that failed, for good; a Redis that does not answer its probe, until it
// does).
type healthState struct {
	eng      *engine.Engine
	probe    func(context.Context) error // the storage's probe; nil for none
	log      *slog.Logger
	grpc     *health.Server
	draining atomic.Bool
	probeBad atomic.Bool // the last probe failed
	probing  atomic.Bool // a refresh is under way
	mu       sync.Mutex
	last     int // 0 unknown, 1 serving, 2 not serving

	now     func() time.Time // the clock of probeFresh
	probeMu sync.Mutex
	round   *probeRound // the probe under way, or the last one

	stopWatches     chan struct{} // closed by endWatches
	stopWatchesOnce sync.Once
}

func newHealth(eng *engine.Engine, probe func(context.Context) error, log *slog.Logger) *healthState {
	h := &healthState{eng: eng, probe: probe, log: log, grpc: health.NewServer(), stopWatches: make(chan struct{}), now: time.Now}
	h.update()
	return h
}

// service is the gRPC health service: h.grpc, whose Watch streams end at
// endWatches. A Watch stream lasts as long as its client wants, and a
// graceful stop waits for every stream, so without an end a single
// watcher held every shutdown for the whole drain timeout.
func (h *healthState) service() healthpb.HealthServer { return endingWatches{h.grpc, h.stopWatches} }

// endWatches ends the Watch streams (with codes.Canceled), before the
// gRPC server stops gracefully.
func (h *healthState) endWatches() { h.stopWatchesOnce.Do(func() { close(h.stopWatches) }) }

type endingWatches struct {
	*health.Server
	stop <-chan struct{}
}

func (e endingWatches) Watch(in *healthpb.HealthCheckRequest, stream healthpb.Health_WatchServer) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	go func() {
		select {
		case <-e.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return e.Server.Watch(in, watchStream{stream, ctx})
}

// watchStream is a Watch stream whose context ends at endWatches too.
type watchStream struct {
	healthpb.Health_WatchServer
	ctx context.Context
}

func (w watchStream) Context() context.Context { return w.ctx }

// ok reports whether the server is healthy (probing the storage, if it
// has a probe, unless a probe ended within probeFresh), and publishes it
// to gRPC health if it changed.
func (h *healthState) ok() bool { return h.check(false) }

// check is ok; fresh asks for a probe that starts now (or is under way),
// whatever the last one's age.
func (h *healthState) check(fresh bool) bool {
	ok := !h.draining.Load() && h.eng.Healthy() && h.probeOK(fresh)
	h.publish(ok)
	return ok
}

// probeFresh is how long a probe's answer serves health checks: requests
// for /healthcheck and /metrics, however many, cost the storage one probe
// in that time at most.
const probeFresh = time.Second

// probeRound is one probe of the storage: its answer once done is closed.
type probeRound struct {
	done  chan struct{}
	err   error
	ended time.Time // zero while under way
}

// probeOK reports whether the storage answers: the answer of the probe
// under way, else of the last one if it ended within probeFresh and not
// fresh, else of a new probe. It logs when the answer changes.
func (h *healthState) probeOK(fresh bool) bool {
	if h.probe == nil {
		return true
	}
	r, run := h.startProbe(fresh)
	if run {
		h.runProbe(r)
	} else {
		<-r.done
	}
	return r.err == nil
}

// startProbe is the probe whose answer probeOK(fresh) gives: run, if the
// caller must run it (a new one).
func (h *healthState) startProbe(fresh bool) (r *probeRound, run bool) {
	h.probeMu.Lock()
	defer h.probeMu.Unlock()
	r = h.round
	if r == nil || !r.ended.IsZero() && (fresh || h.now().Sub(r.ended) >= probeFresh) {
		r = &probeRound{done: make(chan struct{})}
		h.round, run = r, true
	}
	return r, run
}

// runProbe probes the storage for r.
func (h *healthState) runProbe(r *probeRound) {
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	err := h.probe(ctx)
	if err != nil && h.probeBad.CompareAndSwap(false, true) {
		h.log.Error("the storage does not answer; health reports NOT_SERVING", slog.Any("err", err))
	}
	if err == nil && h.probeBad.CompareAndSwap(true, false) {
		h.log.Info("the storage answers again; health reports SERVING")
	}
	h.probeMu.Lock()
	r.err, r.ended = err, h.now()
	h.probeMu.Unlock()
	close(r.done)
}

// update publishes the current state.
func (h *healthState) update() { h.ok() }

// refresh is update in the background, one at a time, after a fresh
// probe: a request that failed asks for it without waiting for a probe
// of a storage that may not answer for probeTimeout. The probe is
// started before refresh returns, so that a health check after it
// cannot be answered from an older probe.
func (h *healthState) refresh() {
	if !h.probing.CompareAndSwap(false, true) {
		return
	}
	var r *probeRound
	run := false
	if h.probe != nil {
		r, run = h.startProbe(true)
	}
	go func() {
		defer h.probing.Store(false)
		if run {
			h.runProbe(r)
		}
		h.ok() // r's answer, unless it is already stale
	}()
}

func (h *healthState) publish(ok bool) {
	now := 2
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if ok {
		now, st = 1, healthpb.HealthCheckResponse_SERVING
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.draining.Load() { // an answer worked out before drain began is stale
		now, st = 2, healthpb.HealthCheckResponse_NOT_SERVING
	}
	if h.last == now {
		return
	}
	h.last = now
	for _, s := range healthServices {
		h.grpc.SetServingStatus(s, st)
	}
}

// drain reports NOT_SERVING from now on.
func (h *healthState) drain() {
	h.draining.Store(true)
	h.update()
}
