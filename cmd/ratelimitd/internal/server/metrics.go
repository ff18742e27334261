package server

import (
	"net/http"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/seed7fbd42b6/ratelimit/ratelimitprom"
)

// api is the interface a request came through, for the metrics.
type api int

const (
	apiGRPC  api = iota // ShouldRateLimit
	apiJSON             // /json
	apiLimit            // /v1/limit
	apiCheck            // /v1/check
	apiValue            // /v1/value
	numAPIs
)

var apiNames = [numAPIs]string{"grpc", "json", "limit", "check", "value"}

// requestCounters count requests by interface and result.
type requestCounters [numAPIs][numResults]atomic.Uint64

func (c *requestCounters) add(a api, r result) { c[a][r].Add(1) }

// newRegistry returns the registry /metrics serves: the limiter's
// metrics (ratelimit_*), the service's (ratelimitd_*), and the Go
// runtime's and process's.
func (s *Server) newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		ratelimitprom.NewCollector(s.eng.Limiter(), "ratelimit"),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		serviceCollector{s},
	)
	return reg
}

func (s *Server) metricsHandler() http.Handler {
	return promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{ErrorLog: nil})
}

// serviceCollector exports the service's counters, read at each scrape.
type serviceCollector struct{ s *Server }

var (
	descRequests = prometheus.NewDesc("ratelimitd_requests_total",
		"Requests by interface (grpc, json, limit, check, value) and result.", []string{"api", "result"}, nil)
	descDescriptors = prometheus.NewDesc("ratelimitd_descriptors_total",
		"Descriptors of decided requests by outcome.", []string{"outcome"}, nil)
	descUnknownDomain = prometheus.NewDesc("ratelimitd_unknown_domain_requests_total",
		"Requests for a domain the configuration does not have, answered OK.", nil, nil)
	descFailOpen = prometheus.NewDesc("ratelimitd_fail_open_total",
		"Requests answered OK because the limiter could not decide (-fail-open).", nil, nil)
	descReloads = prometheus.NewDesc("ratelimitd_config_reloads_total",
		"Configuration reloads by result (success, failure: the previous configuration kept serving).", []string{"result"}, nil)
	descLastReload = prometheus.NewDesc("ratelimitd_config_last_reload_success",
		"1 if the last configuration load succeeded, else 0.", nil, nil)
	descLastReloadTime = prometheus.NewDesc("ratelimitd_config_last_reload_timestamp_seconds",
		"When the configuration was last loaded, successfully or not.", nil, nil)
	descRules = prometheus.NewDesc("ratelimitd_config_rules",
		"Rules with a rate_limit in the configuration serving.", nil, nil)
	descDomains = prometheus.NewDesc("ratelimitd_config_domains",
		"Domains in the configuration serving.", nil, nil)
	descOverrides = prometheus.NewDesc("ratelimitd_limit_overrides",
		"Distinct limit overrides requests have set.", nil, nil)
	descHealthy = prometheus.NewDesc("ratelimitd_healthy",
		"1 while the server reports SERVING, else 0 (draining, or the limiter failed).", nil, nil)
)

func (c serviceCollector) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(c, ch) }

func (c serviceCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	for a := range numAPIs {
		for r := range numResults {
			ch <- prometheus.MustNewConstMetric(descRequests, prometheus.CounterValue,
				float64(s.requests[a][r].Load()), apiNames[a], resultNames[r])
		}
	}
	st := s.eng.Stats()
	for _, d := range []struct {
		name string
		n    uint64
	}{{"within_limit", st.WithinLimit}, {"over_limit", st.OverLimit}, {"shadow_over_limit", st.ShadowOverLimit},
		{"unlimited", st.Unlimited}, {"unmatched", st.Unmatched}, {"replaced", st.Replaced}} {
		ch <- prometheus.MustNewConstMetric(descDescriptors, prometheus.CounterValue, float64(d.n), d.name)
	}
	ch <- prometheus.MustNewConstMetric(descUnknownDomain, prometheus.CounterValue, float64(st.UnknownDomain))
	ch <- prometheus.MustNewConstMetric(descFailOpen, prometheus.CounterValue, float64(st.FailedOpen))
	rs := s.reload.stats()
	ch <- prometheus.MustNewConstMetric(descReloads, prometheus.CounterValue, float64(rs.good), "success")
	ch <- prometheus.MustNewConstMetric(descReloads, prometheus.CounterValue, float64(rs.bad), "failure")
	ch <- prometheus.MustNewConstMetric(descLastReload, prometheus.GaugeValue, b2f(rs.lastOK))
	ch <- prometheus.MustNewConstMetric(descLastReloadTime, prometheus.GaugeValue, float64(rs.lastTime.UnixNano())/1e9)
	cfg := s.eng.Config()
	ch <- prometheus.MustNewConstMetric(descRules, prometheus.GaugeValue, float64(len(cfg.Limits())))
	ch <- prometheus.MustNewConstMetric(descDomains, prometheus.GaugeValue, float64(len(cfg.Domains())))
	ch <- prometheus.MustNewConstMetric(descOverrides, prometheus.GaugeValue, float64(st.Overrides))
	ch <- prometheus.MustNewConstMetric(descHealthy, prometheus.GaugeValue, b2f(s.health.ok()))
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
