package server

import (
	"context"
	"testing"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// Health follows draining and the limiter, on gRPC under every name.
func TestHealth(t *testing.T) {
	s, _ := newTestServer(t, testRules)
	status := func(name string) healthpb.HealthCheckResponse_ServingStatus {
		r, err := s.health.grpc.Check(context.Background(), &healthpb.HealthCheckRequest{Service: name})
		if err != nil {
			t.Fatal(err)
		}
		return r.Status
	}
	for _, name := range healthServices {
		if !s.health.ok() || status(name) != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("%q: not serving at start", name)
		}
	}
	s.health.drain()
	for _, name := range healthServices {
		if s.health.ok() || status(name) != healthpb.HealthCheckResponse_NOT_SERVING {
			t.Errorf("%q: serving while draining", name)
		}
	}
}
