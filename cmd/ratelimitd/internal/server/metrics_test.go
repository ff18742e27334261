package server

import (
	"testing"
)

// /metrics carries the limiter's, the service's and the runtime's
// metrics.
func TestRegistry(t *testing.T) {
	s, _ := newTestServer(t, testRules)
	s.requests.add(apiJSON, resultInvalid)
	mfs, err := s.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := make(map[string]bool)
	for _, mf := range mfs {
		names[mf.GetName()] = true
		if mf.GetName() == "ratelimitd_requests_total" {
			for _, m := range mf.Metric {
				api, res := m.Label[0].GetValue(), m.Label[1].GetValue()
				if want := api == "json" && res == "invalid"; (m.Counter.GetValue() == 1) != want {
					t.Errorf("requests %s/%s = %v", api, res, m.Counter.GetValue())
				}
			}
		}
	}
	for _, n := range []string{"ratelimitd_requests_total", "ratelimitd_descriptors_total", "ratelimitd_config_reloads_total",
		"ratelimitd_healthy", "ratelimitd_config_rules", "ratelimit_decisions_total", "go_goroutines", "process_cpu_seconds_total"} {
		if !names[n] {
			t.Errorf("no %s", n)
		}
	}
}
