package main

import (
	"bytes"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// SIGTERM drains: health reports NOT_SERVING while requests are still
// served (for -drain-delay, cut short by a second SIGTERM), then the
// server exits 0 with everything it granted on disk.
func TestDrain(t *testing.T) {
	t.Parallel()
	p, f := serveConfig(t, "-drain-delay", "10m")
	p.should(hits(4, d("b", "drain")))
	p.signal(syscall.SIGTERM)
	eventually(t, 30*time.Second, "gRPC health NOT_SERVING", func() bool {
		return p.health("") == healthpb.HealthCheckResponse_NOT_SERVING
	})
	if code, _, _ := httpDo(t, nil, http.MethodGet, "http://"+p.httpAddr+"/healthcheck", nil); code != http.StatusInternalServerError {
		t.Errorf("/healthcheck while draining: %d, want 500", code)
	}
	if got := p.should(d("b", "drain")).Statuses[0].LimitRemaining; got != 95 {
		t.Errorf("a request while draining: %d remaining, want 95", got)
	}
	if metric(t, p.httpAddr, "ratelimitd_healthy", "") != 0 {
		t.Error("ratelimitd_healthy is not 0 while draining")
	}
	p.signal(syscall.SIGTERM)
	if code := p.wait(); code != 0 {
		t.Fatalf("exit code %d, want 0", code)
	}
	if len(p.logs.find("the limiter is closed")) != 1 {
		t.Error("no log of the limiter closing")
	}
	q := f.restart(t)
	if got := q.remaining("b", "drain"); got != 95 {
		t.Errorf("after a restart: %d remaining, want 95", got)
	}
}

// SIGTERM under load: calls in flight finish, and every OK a client
// received is on disk.
func TestSIGTERMUnderLoad(t *testing.T) {
	t.Parallel()
	p, f := serveConfig(t)
	l := loadLedger(p, 32, 8)
	eventually(t, 60*time.Second, "OKs under load", func() bool { return l.total.Load() >= loadTarget() })
	p.signal(syscall.SIGTERM)
	code := p.wait()
	l.Stop()
	if code != 0 {
		t.Fatalf("exit code %d, want 0", code)
	}
	q := f.restart(t)
	l.check(t, q)
}

// loadTarget is how many OKs a load test waits for before stopping the
// server.
func loadTarget() int64 {
	if raceEnabled {
		return 1000
	}
	return 10000
}

// SIGTERM while the server is still starting (here: waiting for a Redis
// that accepts and never answers) ends it then, not once start gives up.
func TestSIGTERMWhileStarting(t *testing.T) {
	t.Parallel()
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			select {
			case accepted <- struct{}{}:
			default:
			}
		}
	}()
	cfg := writeConfig(t, t.TempDir(), "rules.yaml", "domain: d\n")
	cmd := exec.Command(binPath, "serve", "-log-format", "json", "-config", cfg, "-redis", silent.Addr().String(),
		"-grpc-addr", "127.0.0.1:0", "-http-addr", "127.0.0.1:0")
	var logs bytes.Buffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	<-accepted // starting: waiting for Redis
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(logs.String(), "interrupted while starting") {
		t.Errorf("exit code %d, want 1 after %q:\n%s", code, "interrupted while starting", logs.String())
	}
}
