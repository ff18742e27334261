package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// binPath is the ratelimitd binary the end-to-end tests run, built once
// by TestMain (with -race when the tests run with it).
var binPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ratelimitd-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binPath = filepath.Join(dir, "ratelimitd")
	args := []string{"build", "-o", binPath}
	if raceEnabled {
		args = append(args, "-race")
	}
	if out, err := exec.Command("go", append(args, ".")...).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building ratelimitd: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// testConfig is the rules most tests run with. Windows are ten years
// long (from the epoch: the next boundary is in December 2029), so that
// counts never reset during a test; "year" is there to show units.
const testConfig = `domain: e2e
descriptors:
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit: {unit: year, requests_per_unit: 2}
  - key: path
    value: "/api/*"
    rate_limit: {period: 87600h, requests_per_unit: 3}
  - key: path
    rate_limit: {period: 87600h, requests_per_unit: 100}
  - key: user
    rate_limit: {period: 87600h, requests_per_unit: 5, name: user}
  - key: vip
    rate_limit: {period: 87600h, requests_per_unit: 50, replaces: [{name: user}]}
  - key: shadow
    shadow_mode: true
    rate_limit: {period: 87600h, requests_per_unit: 1}
  - key: free
    rate_limit: {unlimited: true}
  - key: a
    rate_limit: {period: 87600h, requests_per_unit: 3}
  - key: b
    rate_limit: {period: 87600h, requests_per_unit: 100}
  - key: tb
    rate_limit: {algorithm: token_bucket, period: 100000h, requests_per_unit: 10, max_reserved: 5}
  - key: ledger
    rate_limit: {period: 87600h, requests_per_unit: 1000000000}
`

// writeConfig writes src as the file name in dir and returns its path.
// It writes a hidden file and renames it, so that a server watching dir
// never sees the file half written.
func writeConfig(t testing.TB, dir, name, src string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	tmp := filepath.Join(dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// proc is a running ratelimitd.
type proc struct {
	t                             testing.TB
	cmd                           *exec.Cmd
	grpcAddr, httpAddr, adminAddr string
	conn                          *grpc.ClientConn
	rls                           rlsv3.RateLimitServiceClient
	logs                          *logLines
	done                          chan struct{} // closed when the process has exited
	exitCode                      int
}

// logLines collects a process's JSON log lines.
type logLines struct {
	mu    sync.Mutex
	lines []map[string]any
	raw   bytes.Buffer
}

// add records one line and returns it decoded (nil if it is not JSON).
func (l *logLines) add(line string) map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.raw.WriteString(line + "\n")
	var m map[string]any
	if json.Unmarshal([]byte(line), &m) != nil {
		return nil
	}
	l.lines = append(l.lines, m)
	return m
}

// find returns the log lines whose msg contains msg.
func (l *logLines) find(msg string) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, m := range l.lines {
		if s, _ := m["msg"].(string); strings.Contains(s, msg) {
			out = append(out, m)
		}
	}
	return out
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.raw.String()
}

// start runs "ratelimitd serve" with args (after defaults: JSON logs,
// free loopback ports for gRPC and HTTP) and waits until it serves.
func start(t testing.TB, args ...string) *proc {
	t.Helper()
	p := tryStart(t, args...)
	if p.grpcAddr == "" && p.httpAddr == "" {
		t.Fatalf("ratelimitd exited with %d before serving:\n%s", p.exitCode, p.logs)
	}
	return p
}

// tryStart is start without failing when the server exits instead of
// serving.
func tryStart(t testing.TB, args ...string) *proc {
	t.Helper()
	return tryStartEnv(t, nil, args...)
}

// tryStartEnv is tryStart with env ("KEY=value") added to the
// environment.
func tryStartEnv(t testing.TB, env []string, args ...string) *proc {
	t.Helper()
	all := append([]string{"serve", "-log-format", "json", "-grpc-addr", "127.0.0.1:0", "-http-addr", "127.0.0.1:0"}, args...)
	cmd := exec.Command(binPath, all...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{t: t, cmd: cmd, logs: new(logLines), done: make(chan struct{})}
	serving := make(chan map[string]any, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		sent := false
		for sc.Scan() {
			if m := p.logs.add(sc.Text()); !sent && m["msg"] == "serving" {
				serving <- m
				sent = true
			}
		}
		err := cmd.Wait()
		p.exitCode = cmd.ProcessState.ExitCode()
		_ = err
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			cmd.Process.Kill()
			<-p.done
		}
		if p.conn != nil {
			p.conn.Close()
		}
		if t.Failed() {
			t.Logf("ratelimitd log:\n%s", p.logs)
		}
	})
	select {
	case m := <-serving:
		p.grpcAddr, _ = m["grpc"].(string)
		p.httpAddr, _ = m["http"].(string)
		p.adminAddr, _ = m["admin"].(string)
	case <-p.done:
		return p
	case <-time.After(60 * time.Second):
		t.Fatalf("ratelimitd did not serve within 60s:\n%s", p.logs)
	}
	if p.grpcAddr != "" {
		p.conn, err = grpc.NewClient(p.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		p.rls = rlsv3.NewRateLimitServiceClient(p.conn)
	}
	return p
}

// signal sends sig to the process.
func (p *proc) signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatal(err)
	}
}

// wait waits for the process to exit and returns its exit code.
func (p *proc) wait() int {
	p.t.Helper()
	select {
	case <-p.done:
		return p.exitCode
	case <-time.After(60 * time.Second):
		p.t.Fatalf("ratelimitd did not exit within 60s:\n%s", p.logs)
		return -1
	}
}

// eventually polls cond until it holds, failing after timeout.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ctx is a context for one call.
func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// d builds a descriptor from key, value pairs.
func d(kvs ...string) *ratelimitv3.RateLimitDescriptor {
	out := new(ratelimitv3.RateLimitDescriptor)
	for i := 0; i+1 < len(kvs); i += 2 {
		out.Entries = append(out.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: kvs[i], Value: kvs[i+1]})
	}
	return out
}

// hits sets a descriptor's own hits_addend.
func hits(n uint64, desc *ratelimitv3.RateLimitDescriptor) *ratelimitv3.RateLimitDescriptor {
	desc.HitsAddend = wrapperspb.UInt64(n)
	return desc
}

// should calls ShouldRateLimit for descriptors of domain e2e, failing on
// an error.
func (p *proc) should(ds ...*ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitResponse {
	p.t.Helper()
	resp, err := p.rls.ShouldRateLimit(ctx(p.t), &rlsv3.RateLimitRequest{Domain: "e2e", Descriptors: ds})
	if err != nil {
		p.t.Fatalf("ShouldRateLimit: %v", err)
	}
	return resp
}

// remaining is limit_remaining of a check (hits 0) of one descriptor.
func (p *proc) remaining(kvs ...string) uint32 {
	p.t.Helper()
	resp := p.should(hits(0, d(kvs...)))
	return resp.Statuses[0].LimitRemaining
}

// health asks gRPC health about service.
func (p *proc) health(service string) healthpb.HealthCheckResponse_ServingStatus {
	p.t.Helper()
	resp, err := healthpb.NewHealthClient(p.conn).Check(ctx(p.t), &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		return healthpb.HealthCheckResponse_UNKNOWN
	}
	return resp.Status
}

// httpDo sends method to url with body (nil for none) and returns the
// status and body.
func httpDo(t *testing.T, client *http.Client, method, url string, body []byte) (int, []byte, http.Header) {
	t.Helper()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx(t), method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, url, err)
	}
	return resp.StatusCode, out, resp.Header
}

// post POSTs body to http://addr+path.
func post(t *testing.T, addr, path, body string) (int, []byte) {
	t.Helper()
	code, out, _ := httpDo(t, nil, http.MethodPost, "http://"+addr+path, []byte(body))
	return code, out
}

// metric reads one sample from addr's /metrics: name with exactly the
// labels given as `k="v",...` ("" for none); -1 if absent.
func metric(t *testing.T, addr, name, labels string) float64 {
	t.Helper()
	_, body, _ := httpDo(t, nil, http.MethodGet, "http://"+addr+"/metrics", nil)
	want := name
	if labels != "" {
		want += "{" + labels + "}"
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, want+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metric %s: %v", want, err)
			}
			return f
		}
	}
	return -1
}

// decode unmarshals JSON, failing the test on an error.
func decode(t *testing.T, data []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("decoding %s: %v", data, err)
	}
}

// files are a test server's configuration and data file.
type files struct{ config, data string }

// restart starts another server on the same files.
func (f files) restart(t *testing.T, args ...string) *proc {
	t.Helper()
	return start(t, append([]string{"-config", f.config, "-data", f.data}, args...)...)
}

// serveConfig starts a server on testConfig with a data file in a
// temporary directory, plus args.
func serveConfig(t *testing.T, args ...string) (*proc, files) {
	t.Helper()
	dir := t.TempDir()
	f := files{config: writeConfig(t, dir, "e2e.yaml", testConfig), data: filepath.Join(dir, "data.db")}
	return f.restart(t, args...), f
}

// ledger counts, per key, the OKs clients received and the calls that
// failed (which the server may or may not have counted).
type ledger struct {
	keys      int
	oks, errs []atomic.Int64
	total     atomic.Int64 // OKs
	wg        sync.WaitGroup
	stop      chan struct{}
}

// ledgerLimit is the requests_per_unit of testConfig's ledger rule.
const ledgerLimit = 1000000000

// loadLedger runs callers goroutines calling ShouldRateLimit with one
// hit on ledger=k0..k{keys-1}, each call on a fresh connection's stream,
// until Stop.
func loadLedger(p *proc, callers, keys int) *ledger {
	l := &ledger{keys: keys, oks: make([]atomic.Int64, keys), errs: make([]atomic.Int64, keys), stop: make(chan struct{})}
	for c := range callers {
		l.wg.Go(func() {
			for i := c; ; i += callers {
				select {
				case <-l.stop:
					return
				default:
				}
				k := i % keys
				cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				resp, err := p.rls.ShouldRateLimit(cctx, &rlsv3.RateLimitRequest{Domain: "e2e",
					Descriptors: []*ratelimitv3.RateLimitDescriptor{d("ledger", fmt.Sprint("k", k))}})
				cancel()
				switch {
				case err != nil:
					l.errs[k].Add(1)
				case resp.OverallCode == rlsv3.RateLimitResponse_OK:
					l.oks[k].Add(1)
					l.total.Add(1)
				}
			}
		})
	}
	return l
}

// Stop ends the load and waits for the callers.
func (l *ledger) Stop() {
	close(l.stop)
	l.wg.Wait()
}

// check asserts, on a server restarted on the file, that every OK a
// client received is counted, and nothing more than was asked.
func (l *ledger) check(t *testing.T, q *proc) {
	t.Helper()
	for k := range l.keys {
		counted := int64(ledgerLimit) - int64(q.remaining("ledger", fmt.Sprint("k", k)))
		oks, errs := l.oks[k].Load(), l.errs[k].Load()
		if counted < oks || counted > oks+errs {
			t.Errorf("ledger=k%d: %d counted after the restart; clients received %d OKs and %d errors", k, counted, oks, errs)
		}
	}
}

// atomicCounter hands out 0, 1, 2, ... to concurrent callers.
type atomicCounter struct{ n atomic.Int64 }

func (c *atomicCounter) next() int64 { return c.n.Add(1) - 1 }
