//go:build linux

package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/seed7fbd42b6/ratelimit/internal/redistest"
)

// spread sends n requests for one descriptor, concurrently, alternating
// over the replicas, and returns how many were OK. Every call must
// answer (OK or OVER_LIMIT).
func spread(t *testing.T, n int, desc func() *ratelimitv3.RateLimitDescriptor, replicas ...*proc) int64 {
	t.Helper()
	var oks, errs atomic.Int64
	var wg sync.WaitGroup
	for i := range n {
		p := replicas[i%len(replicas)]
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			resp, err := p.rls.ShouldRateLimit(cctx, &rlsv3.RateLimitRequest{Domain: "e2e",
				Descriptors: []*ratelimitv3.RateLimitDescriptor{desc()}})
			switch {
			case err != nil:
				errs.Add(1)
			case resp.OverallCode == ok:
				oks.Add(1)
			}
		})
	}
	wg.Wait()
	if errs.Load() != 0 {
		t.Fatalf("%d of %d calls failed", errs.Load(), n)
	}
	return oks.Load()
}

// sharesLimits checks that replicas on one Redis (or cluster) decide as
// one limiter: requests spread over them get exactly the limit in all; a
// request one denies takes nothing from any of its descriptors (seen
// from another); a request one grants is seen by the others.
func sharesLimits(t *testing.T, replicas ...*proc) {
	t.Helper()
	if got := spread(t, 300, func() *ratelimitv3.RateLimitDescriptor { return d("b", "shared") }, replicas...); got != 100 {
		t.Errorf("300 requests for b=shared (100 per window) over %d replicas: %d OK, want 100", len(replicas), got)
	}
	for i, p := range replicas {
		if got := p.remaining("b", "shared"); got != 0 {
			t.Errorf("replica %d: b=shared has %d left, want 0", i, got)
		}
	}
	p, q := replicas[0], replicas[len(replicas)-1]
	for range 3 {
		p.should(d("a", "m"))
	}
	if got := p.should(d("b", "m"), d("a", "m")); got.OverallCode != over || got.Statuses[0].Code != ok || got.Statuses[1].Code != over {
		t.Errorf("b=m with a=m exhausted: %v, want OVER_LIMIT on a=m only", codesOf(got))
	}
	if got := q.remaining("b", "m"); got != 100 {
		t.Errorf("b=m after a denied request: %d left on another replica, want 100 (nothing taken)", got)
	}
	if got := q.should(d("b", "n"), hits(2, d("a", "n"))); got.OverallCode != ok {
		t.Errorf("b=n with a=n: %v, want OK", codesOf(got))
	}
	if b, a := p.remaining("b", "n"), p.remaining("a", "n"); b != 99 || a != 1 {
		t.Errorf("after a granted request on another replica: b=n %d, a=n %d left, want 99 and 1", b, a)
	}
}

// Two ratelimitd replicas on one Redis share their limits, and a
// replica restarted finds the state where it was.
func TestRedisReplicasShareLimits(t *testing.T) {
	t.Parallel()
	r := startRedis(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "e2e.yaml", testConfig)
	args := []string{"-config", cfg, "-redis", r.Addr(), "-redis-prefix", "e2e:"}
	p1, p2 := start(t, args...), start(t, args...)
	for _, p := range []*proc{p1, p2} {
		if m := p.logs.find("serving")[0]; m["storage"] != "redis" || m["data"] != "" {
			t.Errorf("serving with storage %v, data %v; want redis and no file", m["storage"], m["data"])
		}
	}
	sharesLimits(t, p1, p2)

	p1.signal(syscall.SIGTERM)
	if code := p1.wait(); code != 0 {
		t.Fatalf("SIGTERM: exit %d", code)
	}
	p3 := start(t, args...)
	for _, c := range []struct {
		p    *proc
		kvs  []string
		want uint32
	}{{p3, []string{"b", "shared"}, 0}, {p3, []string{"a", "m"}, 0}, {p3, []string{"b", "m"}, 100}, {p3, []string{"a", "n"}, 1},
		{p2, []string{"b", "n"}, 99}} {
		if got := c.p.remaining(c.kvs...); got != c.want {
			t.Errorf("after a replica's restart: %v has %d left, want %d", c.kvs, got, c.want)
		}
	}
	// A replica with another prefix has limits of its own.
	other := start(t, "-config", cfg, "-redis", r.Addr(), "-redis-prefix", "other:")
	if got := other.remaining("b", "shared"); got != 100 {
		t.Errorf("another prefix: b=shared has %d left, want 100", got)
	}
	if _, err := os.Stat("ratelimitd.db"); err == nil {
		t.Error("a ratelimitd on Redis created -data's default file")
	}
}

// Replicas on a Redis Cluster of three masters, given all three
// addresses, share their limits too.
func TestRedisClusterReplicasShareLimits(t *testing.T) {
	t.Parallel()
	addrs := startRedisCluster(t)
	cfg := writeConfig(t, t.TempDir(), "e2e.yaml", testConfig)
	args := []string{"-config", cfg, "-redis", strings.Join(addrs, ",")}
	p1, p2 := start(t, args...), start(t, args...)
	sharesLimits(t, p1, p2)
	// Requests of many keys, spread over the masters' slots.
	for k := range 20 {
		p1.should(d("a", fmt.Sprint("k", k)), d("b", fmt.Sprint("k", k)))
	}
	for k := range 20 {
		if a, b := p2.remaining("a", fmt.Sprint("k", k)), p2.remaining("b", fmt.Sprint("k", k)); a != 2 || b != 99 {
			t.Errorf("k%d: a %d, b %d left, want 2 and 99", k, a, b)
		}
	}
	// One seed address finds the cluster with -redis-cluster.
	p3 := start(t, "-config", cfg, "-redis", addrs[1], "-redis-cluster")
	if got := p3.remaining("b", "shared"); got != 0 {
		t.Errorf("-redis-cluster with one seed: b=shared has %d left, want 0", got)
	}
}

// When Redis does not answer, requests fail (gRPC Unavailable) and
// health fails; once it is back (its append-only file replayed), health
// recovers and every grant acknowledged before is still counted.
func TestRedisFailsClosed(t *testing.T) {
	t.Parallel()
	r := startRedis(t)
	cfg := writeConfig(t, t.TempDir(), "e2e.yaml", testConfig)
	p := start(t, "-config", cfg, "-redis", r.Addr())
	p.should(d("a", "fc"))
	r.Kill()
	resp, err := p.rls.ShouldRateLimit(ctx(t), &rlsv3.RateLimitRequest{Domain: "e2e",
		Descriptors: []*ratelimitv3.RateLimitDescriptor{d("a", "fc")}})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("Redis down: %v %v, want Unavailable", resp, err)
	}
	if code, _ := post(t, p.httpAddr, "/json", `{"domain":"e2e","descriptors":[{"entries":[{"key":"a","value":"fc"}]}]}`); code != http.StatusServiceUnavailable {
		t.Errorf("/json with Redis down: %d, want 503", code)
	}
	if code, _, _ := httpDo(t, nil, http.MethodGet, "http://"+p.httpAddr+"/healthcheck", nil); code != http.StatusInternalServerError {
		t.Errorf("/healthcheck with Redis down: %d, want 500", code)
	}
	eventually(t, 30*time.Second, "health NOT_SERVING", func() bool {
		return p.health("") == healthpb.HealthCheckResponse_NOT_SERVING
	})
	if metric(t, p.httpAddr, "ratelimitd_healthy", "") != 0 {
		t.Error("ratelimitd_healthy is not 0 with Redis down")
	}

	if err := r.Restart(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "health SERVING again", func() bool {
		return p.health("") == healthpb.HealthCheckResponse_SERVING
	})
	if code, _, _ := httpDo(t, nil, http.MethodGet, "http://"+p.httpAddr+"/healthcheck", nil); code != http.StatusOK {
		t.Errorf("/healthcheck with Redis back: %d, want 200", code)
	}
	if got := p.remaining("a", "fc"); got != 2 {
		t.Errorf("a=fc after Redis restarted: %d left, want 2 (the grant before kept, the failed ones took nothing)", got)
	}
	if len(p.logs.find("the storage does not answer")) == 0 || len(p.logs.find("the storage answers again")) == 0 {
		t.Errorf("the outage and the recovery are not logged")
	}
}

// On Redis, the admin port's credit, reset and reload work, and reach
// every replica; backup and salvage, which need a file, are refused
// with a message.
func TestRedisAdmin(t *testing.T) {
	t.Parallel()
	r := startRedis(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "e2e.yaml", testConfig)
	args := []string{"-config", cfg, "-redis", r.Addr(), "-admin-addr", "127.0.0.1:0", "-watch-interval", "0"}
	p, q := start(t, args...), start(t, args...)
	p.should(hits(60, d("b", "adm")))
	bucket := `{"domain":"e2e","entries":[{"key":"b","value":"adm"}]`
	if code, out := post(t, p.adminAddr, "/v1/credit", bucket+`,"count":10}`); code != http.StatusOK {
		t.Fatalf("credit: %d %s", code, out)
	}
	if got := q.remaining("b", "adm"); got != 50 {
		t.Errorf("after credit 10 on a replica: %d left on the other, want 50", got)
	}
	if code, out := post(t, q.adminAddr, "/v1/reset", bucket+`}`); code != http.StatusOK {
		t.Fatalf("reset: %d %s", code, out)
	}
	if got := p.remaining("b", "adm"); got != 100 {
		t.Errorf("after reset on a replica: %d left on the other, want 100", got)
	}
	code, out := httpDo2(t, http.MethodGet, p.adminAddr, "/v1/backup")
	if code != http.StatusConflict || !strings.Contains(string(out), "Redis") {
		t.Errorf("backup on Redis: %d %s, want 409 naming Redis", code, out)
	}
	code, out = post(t, p.adminAddr, "/v1/salvage", `{"src":"`+filepath.Join(dir, "x.db")+`","dst":"`+filepath.Join(dir, "y.db")+`"}`)
	if code != http.StatusConflict || !strings.Contains(string(out), "Redis") {
		t.Errorf("salvage on Redis: %d %s, want 409 naming Redis", code, out)
	}
	writeConfig(t, dir, "e2e.yaml", strings.Replace(testConfig,
		"  - key: a\n    rate_limit: {period: 87600h, requests_per_unit: 3}",
		"  - key: a\n    rate_limit: {period: 87600h, requests_per_unit: 5}", 1))
	if code, out := post(t, p.adminAddr, "/v1/reload", ""); code != http.StatusOK {
		t.Fatalf("reload: %d %s", code, out)
	}
	if got := p.should(d("a", "reloaded")).Statuses[0]; got.CurrentLimit.GetRequestsPerUnit() != 5 || got.LimitRemaining != 4 {
		t.Errorf("after a reload: %v, want 4 of 5 left", got)
	}
	// A bucket holds tokens: the replica not reloaded reads the 4 left
	// capped at its own limit, 3; reloaded, it reads them all.
	if got := q.remaining("a", "reloaded"); got != 3 {
		t.Errorf("the replica not reloaded: a=reloaded %d left, want 3 (4 capped at its 3)", got)
	}
	if code, out := post(t, q.adminAddr, "/v1/reload", ""); code != http.StatusOK {
		t.Fatalf("reload: %d %s", code, out)
	}
	if got := q.remaining("a", "reloaded"); got != 4 {
		t.Errorf("the replica reloaded: a=reloaded %d left, want 4", got)
	}
	if metric(t, p.httpAddr, "ratelimitd_healthy", "") != 1 || metric(t, p.httpAddr, "ratelimitd_config_reloads_total", `result="success"`) != 1 {
		t.Error("metrics: not healthy, or the reload not counted")
	}
}

// ratelimitd refuses to start on Redis it cannot reach, or whose
// settings could lose grants (unless told to accept them).
func TestRedisStartErrors(t *testing.T) {
	t.Parallel()
	r := startRedis(t, "--appendfsync", "everysec")
	cfg := writeConfig(t, t.TempDir(), "e2e.yaml", testConfig)
	// An address where no Redis answers: a listener that hangs up at
	// once, held for the test so that no other test's server takes it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-redis", ln.Addr().String()}, "cannot start"},
		{[]string{"-redis", r.Addr()}, "appendfsync"},
	} {
		p := tryStart(t, append([]string{"-config", cfg}, c.args...)...)
		if code := p.wait(); code != 1 || !strings.Contains(p.logs.String(), c.want) {
			t.Errorf("%v: exit %d, want 1 with %q:\n%s", c.args, code, c.want, p.logs)
		}
	}
	p := start(t, "-config", cfg, "-redis", r.Addr(), "-redis-allow-not-durable")
	if len(p.logs.find("-redis-allow-not-durable")) != 1 {
		t.Error("-redis-allow-not-durable is not warned about")
	}
	if got := p.should(d("a", "x")).OverallCode; got != ok {
		t.Errorf("-redis-allow-not-durable: %v, want OK", got)
	}
}

// TLS to Redis, verified against -redis-ca, with the password from
// REDIS_PASSWORD; a wrong password, or no TLS, does not start.
func TestRedisTLSAndPassword(t *testing.T) {
	t.Parallel()
	pk := newPKI(t)
	cert, key := pk.issue(t, true)
	dir := t.TempDir()
	certFile, keyFile, caFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"), filepath.Join(dir, "ca.pem")
	for f, b := range map[string][]byte{certFile: cert, keyFile: key, caFile: pk.caPEM} {
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	srv := redistest.ForTest(t, redistest.Config{TLS: true, Args: append(redistest.Durable(),
		"--tls-cert-file", certFile, "--tls-key-file", keyFile,
		"--tls-ca-cert-file", caFile, "--tls-auth-clients", "no", "--requirepass", "s3cret")})
	cfg := writeConfig(t, dir, "e2e.yaml", testConfig)
	addr := srv.TLSAddr()
	p := tryStartEnv(t, []string{"REDIS_PASSWORD=s3cret"}, "-config", cfg, "-redis", addr, "-redis-ca", caFile)
	if p.grpcAddr == "" {
		t.Fatalf("TLS with the right CA and password: exit %d:\n%s", p.exitCode, p.logs)
	}
	if got := p.should(d("a", "tls")).Statuses[0]; got.Code != ok || got.LimitRemaining != 2 {
		t.Errorf("over TLS: %v, want OK with 2 left", got)
	}
	pwFile := filepath.Join(dir, "pw")
	if err := os.WriteFile(pwFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	q := start(t, "-config", cfg, "-redis", addr, "-redis-ca", caFile, "-redis-password-file", pwFile)
	if got := q.remaining("a", "tls"); got != 2 {
		t.Errorf("-redis-password-file: a=tls %d left, want 2", got)
	}
	for _, c := range []struct {
		env  []string
		args []string
	}{
		{[]string{"REDIS_PASSWORD=wrong"}, []string{"-redis-ca", caFile}},
		{[]string{"REDIS_PASSWORD=s3cret"}, nil},                    // no TLS to a TLS port
		{[]string{"REDIS_PASSWORD=s3cret"}, []string{"-redis-tls"}}, // a CA the system does not trust
	} {
		p := tryStartEnv(t, c.env, append([]string{"-config", cfg, "-redis", addr}, c.args...)...)
		if code := p.wait(); code != 1 || !strings.Contains(p.logs.String(), "cannot start") {
			t.Errorf("%v %v: exit %d, want 1 (cannot start):\n%s", c.env, c.args, code, p.logs)
		}
	}
}

// An override whose period Redis cannot hold (over redislimit.MaxWindow)
// is InvalidArgument and keeps none of the -max-overrides slots: the next
// distinct override still fits.
func TestRedisRefusedOverrideKeepsNoSlot(t *testing.T) {
	t.Parallel()
	r := startRedis(t)
	cfg := writeConfig(t, t.TempDir(), "e2e.yaml", testConfig)
	p := start(t, "-config", cfg, "-redis", r.Addr(), "-max-overrides", "1")
	long := d("anything", "x")
	long.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 2, Unit: typev3.RateLimitUnit_YEAR, UnitMultiplier: wrapperspb.UInt32(50)}
	for range 2 {
		_, err := p.rls.ShouldRateLimit(ctx(t), &rlsv3.RateLimitRequest{Domain: "e2e", Descriptors: []*ratelimitv3.RateLimitDescriptor{long}})
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("an override of 50 years on Redis: %v, want InvalidArgument", err)
		}
	}
	o := d("anything", "y")
	o.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 2, Unit: typev3.RateLimitUnit_MINUTE}
	if st := p.should(o).Statuses[0]; st.Code != ok || st.CurrentLimit.GetRequestsPerUnit() != 2 {
		t.Errorf("the first override Redis can hold, after a refused one (bound 1): %v, want OK", st)
	}
}
