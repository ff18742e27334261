package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// svcFlags parses args as the command line.
func svcFlags(t *testing.T, args ...string) (*config, error) {
	t.Helper()
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return parseFlags(fs, args)
}

func TestServiceFlags(t *testing.T) {
	cfg, err := svcFlags(t)
	if err != nil || cfg.svc.on {
		t.Fatalf("default: on=%v, err %v; want off", cfg != nil && cfg.svc.on, err)
	}
	cfg, err = svcFlags(t, "-service", "-service-ref", "6.8k/s, 135.5ms")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.svc.refRate != 6800 || cfg.svc.refP99 != 135500*time.Microsecond {
		t.Errorf("-service-ref parsed to %v, %v", cfg.svc.refRate, cfg.svc.refP99)
	}
	for _, args := range [][]string{
		{"-service", "-service-ref", "6816"},
		{"-service", "-service-ref", "6816,fast"},
		{"-service", "-service-ref", "0,1ms"},
		{"-service", "-service-ref", "6816,135ms", "-service-addr", "127.0.0.1:1"},
		{"-service", "-service-conns", "0"},
		{"-service", "-service-d", "0"},
	} {
		if _, err := svcFlags(t, args...); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
}

func TestParseServiceRef(t *testing.T) {
	for _, c := range []struct {
		in   string
		rate float64
		p99  time.Duration
	}{
		{"6816,135ms", 6816, 135 * time.Millisecond},
		{"2827/s,286.69ms", 2827, 286690 * time.Microsecond},
		{" 1.5M , 2s", 1.5e6, 2 * time.Second},
	} {
		rate, p99, err := parseServiceRef(c.in)
		if err != nil || rate != c.rate || p99 != c.p99 {
			t.Errorf("parseServiceRef(%q) = %v, %v, %v; want %v, %v", c.in, rate, p99, err, c.rate, c.p99)
		}
	}
}

// The rule is envoyproxy/ratelimit's format: one domain, one key-only
// descriptor, a per-minute limit on each value.
func TestServiceRule(t *testing.T) {
	got := serviceRule(1000)
	want := []string{"domain: bench", "descriptors:", "  - key: key", "    rate_limit:", "      unit: minute", "      requests_per_unit: 1000"}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(got), "\n") {
		if !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	if !slices.Equal(lines, want) {
		t.Errorf("serviceRule(1000):\n%s\nwant the lines %q", got, want)
	}
}

// One ratelimitd at a time, durable first; an external service is driven
// beside the first.
func TestServicePlan(t *testing.T) {
	labels := func(ps []servicePhase) (out [][]string) {
		for _, p := range ps {
			var l []string
			for _, t := range p.targets {
				l = append(l, t.label)
			}
			if p.ours != nil {
				l = append(l, "start "+p.ours.label)
			}
			out = append(out, l)
		}
		return out
	}
	ps := servicePlan([]string{"memory", "durable", "redis"}, "/tmp/x", "127.0.0.1:9", "envoy")
	got := labels(ps)
	want := [][]string{{"ratelimitd/durable", "envoy", "start ratelimitd/durable"}, {"ratelimitd/memory", "start ratelimitd/memory"}}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("plan %q, want %q", got, want)
	}
	if ps[0].ours.data != filepath.Join("/tmp/x", "ratelimitd.db") || ps[1].ours.data != "" {
		t.Errorf("-data: durable %q, memory %q", ps[0].ours.data, ps[1].ours.data)
	}
	got = labels(servicePlan([]string{"durable"}, "/tmp/x", "", ""))
	if want := [][]string{{"ratelimitd/durable", "start ratelimitd/durable"}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("durable only: plan %q, want %q", got, want)
	}
	got = labels(servicePlan([]string{"redis"}, "/tmp/x", "127.0.0.1:9", "envoy"))
	if want := [][]string{{"envoy"}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("external only: plan %q, want %q", got, want)
	}
}

func TestCheckProbe(t *testing.T) {
	if err := checkProbe(&rlsv3.RateLimitResponse{Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{{}}}); err == nil {
		t.Error("a status without current_limit passed the probe check")
	}
	ok := &rlsv3.RateLimitResponse{Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{{
		CurrentLimit: &rlsv3.RateLimitResponse_RateLimit{RequestsPerUnit: 1}}}}
	if err := checkProbe(ok); err != nil {
		t.Error(err)
	}
	req := serviceRequest("v")
	want := &ratelimitv3.RateLimitDescriptor_Entry{Key: serviceKey, Value: "v"}
	if req.Domain != serviceDomain || len(req.Descriptors) != 1 || len(req.Descriptors[0].Entries) != 1 ||
		req.Descriptors[0].Entries[0].Key != want.Key || req.Descriptors[0].Entries[0].Value != want.Value {
		t.Errorf("request %v", req)
	}
}

// svcRuns makes runs of the given decisions/s and p99 (ms).
func svcRuns(rateP99 ...float64) []serviceRun {
	var rs []serviceRun
	for i := 0; i+1 < len(rateP99); i += 2 {
		rs = append(rs, serviceRun{Seconds: 1, OK: int64(rateP99[i]), DecisionsPerSec: rateP99[i], P50: 1e6, P99: rateP99[i+1] * 1e6})
	}
	return rs
}

func TestCombineServiceRuns(t *testing.T) {
	runs := svcRuns(100, 9, 300, 1, 200, 5)
	runs[1].Errors, runs[1].FirstError, runs[2].OverLimit = 2, "boom", 7
	r := combineServiceRuns("a", "durable", "x", 16, runs)
	if r.DecisionsPerSec != 200 || r.P99 != 5e6 || r.P50 != 1e6 || r.OK != 600 || r.OverLimit != 7 || r.Errors != 2 || r.FirstError != "boom" || len(r.Runs) != 3 {
		t.Errorf("combined %+v", r)
	}
}

// svcOutcome has ours durable and memory, and an external service "ref",
// at 1 and 256 callers, 3 runs each.
func svcOutcome(t *testing.T, args ...string) *serviceOutcome {
	cfg, err := svcFlags(t, append([]string{"-service", "-callers", "1,256", "-runs", "3"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	o := &serviceOutcome{cfg: cfg, labels: []string{"ratelimitd/durable", "ratelimitd/memory"}}
	add := func(label string, n int, runs []serviceRun) {
		o.results = append(o.results, combineServiceRuns(label, "", "addr", n, runs))
	}
	add("ratelimitd/durable", 1, svcRuns(500, 2, 400, 3, 600, 2))
	add("ratelimitd/durable", 256, svcRuns(30000, 40, 20000, 60, 24000, 50))
	add("ratelimitd/memory", 1, svcRuns(3000, 1, 3000, 1, 3000, 1))
	add("ratelimitd/memory", 256, svcRuns(50000, 20, 50000, 20, 50000, 20))
	if cfg.svc.addr != "" {
		o.labels = []string{"ratelimitd/durable", cfg.svc.label, "ratelimitd/memory"}
		add(cfg.svc.label, 1, svcRuns(400, 8, 400, 8, 400, 8))
		// Run by run: 30000/6000 = 5x, 20000/10000 = 2x, 24000/6000 = 4x.
		add(cfg.svc.label, 256, svcRuns(6000, 100, 10000, 50, 6000, 100))
	}
	o.targets = evalServiceTargets(serviceTargets, o.results, &cfg.svc)
	return o
}

func TestServiceTargets(t *testing.T) {
	// Measured in the run: medians of run-by-run ratios.
	o := svcOutcome(t, "-service-addr", "127.0.0.1:1", "-service-label", "envoyproxy/ratelimit")
	if len(o.targets) != 2 {
		t.Fatalf("%d targets", len(o.targets))
	}
	rate, p99 := o.targets[0], o.targets[1]
	if rate.Value != 4 || !slices.Equal(rate.Runs, []float64{5, 2, 4}) || rate.Status != targetMet || rate.Over != "envoyproxy/ratelimit" {
		t.Errorf("decisions/s target %+v", rate)
	}
	// p99 ratios 40/100, 60/50, 50/100: median 0.5.
	if p99.Value != 0.5 || p99.Status != targetMet {
		t.Errorf("p99 target %+v", p99)
	}

	// Given: our median over the figure.
	o = svcOutcome(t, "-service-ref", "8000,40ms")
	rate, p99 = o.targets[0], o.targets[1]
	if rate.Value != 3 || rate.Status != targetMet || rate.Over != refGiven {
		t.Errorf("given decisions/s target %+v", rate)
	}
	if p99.Value != 1.25 || p99.Status != targetMissed {
		t.Errorf("given p99 target %+v", p99)
	}

	// No reference: not run.
	o = svcOutcome(t)
	for _, tr := range o.targets {
		if tr.Status != targetNotRun || tr.Value != 0 {
			t.Errorf("without a reference: %+v", tr)
		}
	}
}

func TestServiceSummary(t *testing.T) {
	var b bytes.Buffer
	o := svcOutcome(t, "-service-addr", "127.0.0.1:1", "-service-label", "envoyproxy/ratelimit")
	printServiceSummary(&b, o)
	out := b.String()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) >= 20 {
		t.Errorf("%d lines, want under 20:\n%s", len(lines), out)
	}
	for _, want := range []string{
		"callers  ratelimitd/durable  envoyproxy/ratelimit  ratelimitd/memory   durable vs envoyproxy/ratelimit",
		"    256  24.0k   50.00ms     6.0k    100.00ms      50.0k   20.00ms     4.00x, p99 0.50x",
		"targets: 2 met, 0 missed, 0 not run",
		"met: durable vs reference (service, 256 callers): 4.00x, want >= 3x (reference envoyproxy/ratelimit, measured in this run)",
		"errors: none",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	for _, l := range lines {
		if strings.HasSuffix(l, " ") {
			t.Errorf("trailing blank in %q", l)
		}
	}

	b.Reset()
	o = svcOutcome(t, "-service-ref", "8000,40ms")
	o.failures = []string{"ratelimitd/durable, 256 callers: 3 errors, the first: boom"}
	printServiceSummary(&b, o)
	out = b.String()
	for _, want := range []string{
		"missed: durable p99 vs reference (service, 256 callers): 1.25x, want < 1x (reference given, not measured in this run: 8.0k/s, p99 40.00ms)",
		"errors: FAILED",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "durable vs ") && strings.Contains(out, "p99 0.") {
		t.Errorf("a ratio column without a measured reference:\n%s", out)
	}

	b.Reset()
	o = svcOutcome(t, "-v")
	printServiceSummary(&b, o)
	printServiceDetails(&b, o)
	out = b.String()
	for _, want := range []string{"needs a reference, -service-addr or -service-ref", "requests_per_unit: 1000000",
		"ratelimitd/durable      256        24.0k", "24.0k 50.00ms"} {
		if !strings.Contains(out, want) {
			t.Errorf("-v output lacks %q:\n%s", want, out)
		}
	}
}

// End to end: ratelimitd built from this repository, driven for a moment
// in both modes, beside another ratelimitd (in memory) standing in for
// the external reference service.
func TestServiceEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs ratelimitd")
	}
	if raceEnabled {
		t.Skip("builds ratelimitd, too slow under the race detector")
	}
	dir := t.TempDir()
	ctx := context.Background()
	bin, err := buildService(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	rule := filepath.Join(dir, "ref.yaml")
	if err := os.WriteFile(rule, []byte(serviceRule(5)), 0o644); err != nil {
		t.Fatal(err)
	}
	ref, err := startService(ctx, bin, rule, "", filepath.Join(dir, "ref.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer ref.stop()

	jsonPath := filepath.Join(dir, "out.json")
	cfg, err := svcFlags(t, "-service", "-service-bin", bin, "-callers", "1,8", "-service-d", "150ms",
		"-service-warmup", "50ms", "-service-keys", "20", "-service-limit", "5", "-dir", dir,
		"-service-addr", ref.addr, "-service-label", "ref", "-json", jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if status := runService(cfg, &stdout, &stderr); status != 0 {
		t.Fatalf("exit status %d\nstdout:\n%s\nstderr:\n%s", status, stdout.String(), stderr.String())
	}
	out := stdout.String()
	if !strings.Contains(out, "callers  ratelimitd/durable  ref") || !strings.Contains(out, "errors: none") {
		t.Errorf("summary:\n%s", out)
	}
	var rep serviceReport
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 6 || !rep.OK || len(rep.Targets) != 2 {
		t.Fatalf("JSON: %d results, ok %v, %d targets", len(rep.Results), rep.OK, len(rep.Targets))
	}
	for _, r := range rep.Results {
		// 20 values of 5 a minute: most decisions are denials.
		if r.OK+r.OverLimit == 0 || r.Errors != 0 || r.OverLimit == 0 || r.DecisionsPerSec <= 0 || r.P99 <= 0 {
			t.Errorf("%s at %d callers: %+v", r.Service, r.Callers, r)
		}
		// Two windows at most (a minute may end during the test).
		if r.OK > 2*20*5 {
			t.Errorf("%s at %d callers granted %d, more than 20 values x 5 in two windows", r.Service, r.Callers, r.OK)
		}
	}
}
