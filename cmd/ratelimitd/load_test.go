package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/seed7fbd42b6/ratelimit/cmd/ratelimitd/internal/loadgen"
)

// benchConfig is the rule the load runs against: every value its own
// counter, never denied (envoyproxy/ratelimit's figures use the same).
const benchConfig = `domain: bench
descriptors:
  - key: key
    rate_limit:
      unit: minute
      requests_per_unit: 1000000
`

// TestLoad measures ratelimitd over gRPC with the embedded file and in
// memory (or, with RATELIMITD_LOAD_ADDR, a service already running there,
// such as envoyproxy/ratelimit, configured with benchConfig), at each
// caller count: medians of the runs. It runs only with RATELIMITD_LOAD=1
// and without -race. Settings: RATELIMITD_LOAD_CALLERS (1,16,256,1024),
// RATELIMITD_LOAD_RUNS (3), RATELIMITD_LOAD_DURATION (5s),
// RATELIMITD_LOAD_WARMUP (1s).
func TestLoad(t *testing.T) {
	if os.Getenv("RATELIMITD_LOAD") == "" {
		t.Skip("set RATELIMITD_LOAD=1 to measure")
	}
	if raceEnabled {
		t.Skip("no measurements under the race detector")
	}
	callers := envInts(t, "RATELIMITD_LOAD_CALLERS", []int{1, 16, 256, 1024})
	runs := envInts(t, "RATELIMITD_LOAD_RUNS", []int{3})[0]
	duration := envDuration(t, "RATELIMITD_LOAD_DURATION", 5*time.Second)
	warmup := envDuration(t, "RATELIMITD_LOAD_WARMUP", time.Second)

	type target struct{ label, addr string }
	var targets []target
	if addr := os.Getenv("RATELIMITD_LOAD_ADDR"); addr != "" {
		targets = append(targets, target{"external " + addr, addr})
	} else {
		dir := t.TempDir()
		cfg := writeConfig(t, dir, "bench.yaml", benchConfig)
		for _, data := range []string{filepath.Join(dir, "bench.db"), ""} {
			label := "ratelimitd, file"
			if data == "" {
				label = "ratelimitd, memory"
			}
			p := start(t, "-config", cfg, "-data", data, "-http-addr", "")
			targets = append(targets, target{label, p.grpcAddr})
		}
	}
	for _, tg := range targets {
		var b strings.Builder
		fmt.Fprintf(&b, "%s: %d runs of %v (after %v warm-up), 100000 keys, 1 descriptor per request, 4 connections\n", tg.label, runs, duration, warmup)
		fmt.Fprintf(&b, "%8s %12s %10s %10s   %s\n", "callers", "decisions/s", "p50", "p99", "runs (decisions/s, errors)")
		for _, n := range callers {
			var rs []loadgen.Result
			for r := range runs {
				res, err := loadgen.Run(context.Background(), loadgen.Options{Addr: tg.addr, Callers: n, Duration: duration,
					Warmup: warmup, Seed: uint64(1 + r*1000003 + n)})
				if err != nil {
					t.Fatalf("%s, %d callers: %v", tg.label, n, err)
				}
				rs = append(rs, res)
			}
			s := loadgen.Summarize(rs)
			var detail []string
			for _, r := range rs {
				detail = append(detail, fmt.Sprintf("%.0f %d", r.PerSecond, r.Errors))
			}
			fmt.Fprintf(&b, "%8d %12.0f %10v %10v   %s\n", n, s.PerSecond, s.P50.Round(time.Microsecond),
				s.P99.Round(time.Microsecond), strings.Join(detail, "; "))
		}
		t.Log("\n" + b.String())
	}
}

// BenchmarkShouldRateLimit is one ShouldRateLimit call to ratelimitd, in
// memory and on its file, from GOMAXPROCS parallel callers (go test
// -cpu sets their number).
func BenchmarkShouldRateLimit(b *testing.B) {
	for _, storage := range []string{"memory", "file"} {
		b.Run(storage, func(b *testing.B) {
			dir := b.TempDir()
			data := ""
			if storage == "file" {
				data = filepath.Join(dir, "bench.db")
			}
			p := start(b, "-config", writeConfig(b, dir, "bench.yaml", benchConfig), "-data", data, "-http-addr", "")
			b.ReportAllocs()
			b.ResetTimer()
			var seq atomicCounter
			b.RunParallel(func(pb *testing.PB) {
				req := &rlsv3.RateLimitRequest{Domain: "bench", Descriptors: []*ratelimitv3.RateLimitDescriptor{d("key", "")}}
				for pb.Next() {
					req.Descriptors[0].Entries[0].Value = "k" + strconv.FormatInt(seq.next()%100000, 10)
					if _, err := p.rls.ShouldRateLimit(context.Background(), req); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

func envInts(t *testing.T, name string, def []int) []int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want positive integers", name, v)
		}
		out = append(out, n)
	}
	return out
}

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return d
}
