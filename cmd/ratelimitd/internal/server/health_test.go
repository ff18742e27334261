package server

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
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

// A probe under way when drain begins cannot publish SERVING after it; a
// refresh does not wait for the probe, and runs one probe at a time.
func TestHealthProbeAcrossDrain(t *testing.T) {
	s, _ := newTestServer(t, testRules)
	entered, release := make(chan struct{}, 4), make(chan struct{})
	probes := 0
	h := s.health
	h.probe = func(context.Context) error {
		probes++
		entered <- struct{}{}
		<-release
		return nil
	}
	h.refresh() // returns at once; its probe waits for release
	<-entered
	h.refresh() // one at a time: no second probe
	h.drain()
	close(release)
	for h.probing.Load() { // the refresh's goroutine publishes, then clears probing
		runtime.Gosched()
	}
	r, err := h.grpc.Check(context.Background(), &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != healthpb.HealthCheckResponse_NOT_SERVING || probes != 1 {
		t.Errorf("after a probe that began before drain: %v, %d probes; want NOT_SERVING, 1", r.Status, probes)
	}
}

// Health checks share the storage's probes: those that arrive while one
// is under way take its answer, and one that ended within probeFresh
// answers for it; a refresh (after a failed request) probes anew, and
// a health check after it gets the new answer.
func TestHealthProbesAreShared(t *testing.T) {
	s, _ := newTestServer(t, testRules)
	h := s.health
	now := time.Unix(1e9, 0)
	h.now = func() time.Time { return now }
	var (
		probes  atomic.Int32
		fail    atomic.Bool
		entered = make(chan struct{}, 1)
		release = make(chan struct{})
	)
	h.probe = func(context.Context) error {
		if probes.Add(1) == 1 {
			entered <- struct{}{}
			<-release
		}
		if fail.Load() {
			return errors.New("down")
		}
		return nil
	}
	h.round = nil // forget newTestServer's probe, made with the real one
	var wg sync.WaitGroup
	wg.Go(func() { h.ok() }) // runs the probe, which waits for release
	<-entered
	for range 7 {
		wg.Go(func() {
			if !h.ok() {
				t.Error("not healthy")
			}
		})
	}
	close(release)
	wg.Wait()
	if n := probes.Load(); n != 1 {
		t.Fatalf("8 checks during one probe: %d probes, want 1", n)
	}
	now = now.Add(probeFresh - 1)
	fail.Store(true)
	if !h.ok() || probes.Load() != 1 {
		t.Fatalf("a check within probeFresh: %d probes, want the last answer (healthy), no probe", probes.Load())
	}
	h.refresh()
	if h.ok() || probes.Load() != 2 {
		t.Fatalf("a check after a refresh: %d probes, want the refresh's answer (not healthy) from its probe", probes.Load())
	}
	for h.probing.Load() {
		runtime.Gosched()
	}
	fail.Store(false)
	now = now.Add(probeFresh)
	if !h.ok() || probes.Load() != 3 {
		t.Fatalf("a check after probeFresh: %d probes, want a new probe (healthy)", probes.Load())
	}
}

// A client watching health does not hold up a graceful stop: its stream
// ends (Canceled) when the watches are ended, as shutdown does first.
func TestWatchEndsAtShutdown(t *testing.T) {
	s, _ := newTestServer(t, testRules)
	go s.grpc.Serve(s.grpcLn)
	conn, err := grpc.NewClient(s.grpcLn.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	w, err := healthpb.NewHealthClient(conn).Watch(context.Background(), &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := w.Recv(); err != nil || r.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("first watch answer: %v %v", r, err)
	}
	s.health.drain()
	if r, err := w.Recv(); err != nil || r.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("watch answer at drain: %v %v", r, err)
	}
	s.health.endWatches()
	stopped := make(chan struct{})
	go func() { s.grpc.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(time.Minute):
		t.Fatal("GracefulStop still waits for the watch after a minute")
	}
	if _, err := w.Recv(); status.Code(err) != codes.Canceled {
		t.Errorf("watch after the stop: %v, want Canceled", err)
	}
}
