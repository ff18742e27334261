package main

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
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
