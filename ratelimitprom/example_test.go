package ratelimitprom_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seed7fbd42b6/ratelimit"
	"github.com/seed7fbd42b6/ratelimit/ratelimitprom"
)

// Register the limiter's collector, then serve the registry (promhttp);
// here the decisions counter is read back from the registry directly.
func ExampleNewCollector() {
	l, err := ratelimit.Open(ratelimit.Options{Limits: map[string]ratelimit.Config{
		"api": {Kind: ratelimit.TokenBucket, Rate: 1, Period: time.Minute},
	}})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(ratelimitprom.NewCollector(l, "ratelimit"))

	for range 3 {
		l.Limit(context.Background(), ratelimit.Request{Name: "api", Key: "ann"})
	}
	families, err := reg.Gather()
	if err != nil {
		log.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "ratelimit_decisions_total" {
			for _, m := range f.GetMetric() {
				fmt.Println(m.GetLabel()[0].GetValue(), m.GetCounter().GetValue())
			}
		}
	}
	// Output:
	// denied 2
	// granted 1
}
