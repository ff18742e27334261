//go:build linux

package main

import (
	"net/http"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// breakDisk makes every further write of the server's file fail (its
// RLIMIT_FSIZE falls below every offset the log writes at).
func breakDisk(t *testing.T, p *proc) {
	t.Helper()
	lim := unix.Rlimit{Cur: 4096, Max: unix.RLIM_INFINITY}
	if err := unix.Prlimit(p.cmd.Process.Pid, unix.RLIMIT_FSIZE, &lim, nil); err != nil {
		t.Skipf("prlimit: %v", err)
	}
}

// When the limiter cannot persist a grant, the request fails (gRPC
// Unavailable: Envoy's failure_mode_deny denies it), and health fails,
// by default; -fail-open answers OK instead.
func TestFailsClosed(t *testing.T) {
	t.Parallel()
	for _, open := range []bool{false, true} {
		name := "closed"
		args := []string{}
		if open {
			name, args = "open", []string{"-fail-open"}
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p, _ := serveConfig(t, args...)
			p.should(d("b", "fc"))
			breakDisk(t, p)
			resp, err := p.rls.ShouldRateLimit(ctx(t), &rlsv3.RateLimitRequest{Domain: "e2e",
				Descriptors: []*ratelimitv3.RateLimitDescriptor{d("b", "fc")}})
			switch {
			case !open && status.Code(err) != codes.Unavailable:
				t.Fatalf("a grant that cannot be persisted: %v %v, want Unavailable", resp, err)
			case open && (err != nil || resp.OverallCode != rlsv3.RateLimitResponse_OK || resp.Statuses[0].CurrentLimit != nil):
				t.Fatalf("-fail-open: %v %v, want OK without a limit", resp, err)
			}
			eventually(t, 30*time.Second, "health NOT_SERVING", func() bool {
				return p.health("") == healthpb.HealthCheckResponse_NOT_SERVING
			})
			if code, _, _ := httpDo(t, nil, http.MethodGet, "http://"+p.httpAddr+"/healthcheck", nil); code != http.StatusInternalServerError {
				t.Errorf("/healthcheck: %d, want 500", code)
			}
			if code, _ := post(t, p.httpAddr, "/json", `{"domain":"e2e","descriptors":[{"entries":[{"key":"b","value":"fc"}]}]}`); open && code != http.StatusOK || !open && code != http.StatusServiceUnavailable {
				t.Errorf("/json: %d", code)
			}
			if open && metric(t, p.httpAddr, "ratelimitd_fail_open_total", "") < 2 {
				t.Error("fail-open answers not counted")
			}
			if !open && metric(t, p.httpAddr, "ratelimitd_requests_total", `api="grpc",result="unavailable"`) != 1 {
				t.Error("unavailable answer not counted")
			}
		})
	}
}
