package server

import (
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/seed7fbd42b6/ratelimit/cmd/ratelimitd/internal/engine"
)

// healthServices are the names gRPC health reports: the server as a
// whole, envoyproxy/ratelimit's name, and the RLS service.
var healthServices = []string{"", "ratelimit", rlsServiceName}

// healthState is whether the server should receive requests: not once it
// drains, nor while the limiter cannot decide.
type healthState struct {
	eng      *engine.Engine
	grpc     *health.Server
	draining atomic.Bool
	mu       sync.Mutex
	last     int // 0 unknown, 1 serving, 2 not serving
}

func newHealth(eng *engine.Engine) *healthState {
	h := &healthState{eng: eng, grpc: health.NewServer()}
	h.update()
	return h
}

// ok reports whether the server is healthy, and publishes it to gRPC
// health if it changed.
func (h *healthState) ok() bool {
	ok := !h.draining.Load() && h.eng.Healthy()
	h.publish(ok)
	return ok
}

// update publishes the current state.
func (h *healthState) update() { h.ok() }

func (h *healthState) publish(ok bool) {
	now := 2
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if ok {
		now, st = 1, healthpb.HealthCheckResponse_SERVING
	}
	h.mu.Lock()
	defer h.mu.Unlock()
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
