package main

import (
	"net/http"
	"strings"
	"testing"
)

// /json takes and gives proto3 JSON as envoyproxy/ratelimit's does: 200
// for OK, 429 for OVER_LIMIT.
func TestJSONEndpoint(t *testing.T) {
	t.Parallel()
	p, _ := serveConfig(t)
	req := `{"domain":"e2e","hitsAddend":2,"descriptors":[{"entries":[{"key":"a","value":"j"}]},{"entries":[{"key":"b","value":"j"}],"hitsAddend":"0"}]}`
	code, body := post(t, p.httpAddr, "/json", req)
	var resp struct {
		OverallCode string
		Statuses    []struct {
			Code           string
			LimitRemaining uint32
			CurrentLimit   struct {
				RequestsPerUnit uint32
				Unit            string
				UnitMultiplier  uint32
			}
			DurationUntilReset string
		}
	}
	decode(t, body, &resp)
	if code != http.StatusOK || resp.OverallCode != "OK" || resp.Statuses[0].LimitRemaining != 1 || resp.Statuses[1].LimitRemaining != 100 ||
		resp.Statuses[0].CurrentLimit.Unit != "YEAR" || resp.Statuses[0].CurrentLimit.UnitMultiplier != 10 || !strings.HasSuffix(resp.Statuses[0].DurationUntilReset, "s") {
		t.Fatalf("%d %s", code, body)
	}
	code, body = post(t, p.httpAddr, "/json", req)
	decode(t, body, &resp)
	if code != http.StatusTooManyRequests || resp.OverallCode != "OVER_LIMIT" || resp.Statuses[0].Code != "OVER_LIMIT" {
		t.Fatalf("second request: %d %s, want 429 OVER_LIMIT", code, body)
	}
	cases := []struct {
		method, body string
		want         int
	}{
		{http.MethodGet, "", http.StatusMethodNotAllowed},
		{http.MethodPost, `{"domain":`, http.StatusBadRequest},
		{http.MethodPost, `{"domain":"e2e","descriptors":[]}`, http.StatusBadRequest},
		{http.MethodPost, `{"domain":"","descriptors":[{"entries":[{"key":"a","value":"j"}]}]}`, http.StatusBadRequest},
		{http.MethodPost, `{"domain":"e2e","unknownField":1,"descriptors":[{"entries":[{"key":"a","value":"j"}]}]}`, http.StatusBadRequest},
	}
	for _, c := range cases {
		var b []byte
		if c.body != "" {
			b = []byte(c.body)
		}
		if got, body, _ := httpDo(t, nil, c.method, "http://"+p.httpAddr+"/json", b); got != c.want {
			t.Errorf("%s %s: %d %s, want %d", c.method, c.body, got, body, c.want)
		}
	}
}

// The native API: limit (with reserve and retry_after), check, value.
func TestNativeAPI(t *testing.T) {
	t.Parallel()
	p, _ := serveConfig(t)
	type status struct {
		OK         bool     `json:"ok"`
		Limit      string   `json:"limit"`
		Key        string   `json:"key"`
		Remaining  *float64 `json:"remaining"`
		RetryAfter float64  `json:"retry_after"`
		Never      bool     `json:"never"`
		Unlimited  bool     `json:"unlimited"`
	}
	type response struct {
		OK         bool     `json:"ok"`
		RetryAfter float64  `json:"retry_after"`
		Statuses   []status `json:"statuses"`
	}
	call := func(path, body string) (int, response) {
		t.Helper()
		code, out := post(t, p.httpAddr, path, body)
		var r response
		if code == http.StatusOK || code == http.StatusTooManyRequests {
			decode(t, out, &r)
		}
		return code, r
	}
	two := `{"domain":"e2e","descriptors":[{"entries":[{"key":"a","value":"n"}],"hits":2},{"entries":[{"key":"free","value":"n"}]}]}`
	code, r := call("/v1/check", two)
	if code != http.StatusOK || !r.OK || *r.Statuses[0].Remaining != 3 || !r.Statuses[1].Unlimited {
		t.Fatalf("check: %d %+v", code, r)
	}
	code, r = call("/v1/limit", two)
	if code != http.StatusOK || *r.Statuses[0].Remaining != 1 || r.Statuses[0].Limit != "e2e.a" || r.Statuses[0].Key != "a=n" {
		t.Fatalf("limit: %d %+v", code, r)
	}
	code, r = call("/v1/limit", two)
	if code != http.StatusTooManyRequests || r.OK || r.RetryAfter < 3600 || r.Statuses[0].OK {
		t.Fatalf("limit again: %d %+v, want 429", code, r)
	}
	// Reservations: a token bucket of 10 (5 of debt allowed) per 100000h.
	code, r = call("/v1/limit", `{"domain":"e2e","reserve":true,"hits":13,"descriptors":[{"entries":[{"key":"tb","value":"n"}]}]}`)
	perToken := 100000.0 * 3600 / 10
	if code != http.StatusOK || !r.OK || *r.Statuses[0].Remaining != -3 || !near(r.RetryAfter, 3*perToken) {
		t.Fatalf("reserve 13: %d %+v, want OK, -3 left, retry after %v s", code, r, 3*perToken)
	}
	code, r = call("/v1/limit", `{"domain":"e2e","reserve":true,"hits":3,"descriptors":[{"entries":[{"key":"tb","value":"n"}]}]}`)
	if code != http.StatusTooManyRequests || !near(r.RetryAfter, perToken) {
		t.Fatalf("reserve 3 more (debt 6 > 5): %d %+v, want 429 retry after %v s", code, r, perToken)
	}
	code, out := post(t, p.httpAddr, "/v1/value", `{"domain":"e2e","entries":[{"key":"a","value":"n"}]}`)
	var v struct {
		Limit  string  `json:"limit"`
		Key    string  `json:"key"`
		Value  float64 `json:"value"`
		Config struct {
			Algorithm string  `json:"algorithm"`
			Rate      float64 `json:"rate"`
			Period    float64 `json:"period"`
		} `json:"config"`
	}
	decode(t, out, &v)
	if code != http.StatusOK || v.Value != 1 || v.Config.Algorithm != "fixed_window" || v.Config.Rate != 3 || v.Config.Period != 87600*3600 {
		t.Fatalf("value: %d %s", code, out)
	}
	for _, c := range []struct {
		path, body string
		want       int
	}{
		{"/v1/value", `{"domain":"e2e","entries":[{"key":"nothing","value":"n"}]}`, http.StatusNotFound},
		{"/v1/value", `{"domain":"nope","entries":[{"key":"a","value":"n"}]}`, http.StatusNotFound},
		{"/v1/limit", `{"domain":"e2e","descriptors":[{"entries":[{"key":"a","value":"n"}],"hits":-1}]}`, http.StatusBadRequest},
		{"/v1/limit", `{"domain":"e2e","descriptors":[{"entries":[{"key":"a","value":"n"}]}],"extra":1}`, http.StatusBadRequest},
		{"/v1/credit", `{"domain":"e2e","entries":[{"key":"a","value":"n"}],"count":1}`, http.StatusNotFound},
		{"/v1/value", `{"domain":"e2e","entries":[{"key":"a","value":"n"}],"count":1}`, http.StatusBadRequest}, // a credit's field
	} {
		if code, out := post(t, p.httpAddr, c.path, c.body); code != c.want {
			t.Errorf("%s %s: %d %s, want %d", c.path, c.body, code, out, c.want)
		}
	}
}

// near reports whether got is within a second of want (the limiter's
// clock moves between the call and the check).
func near(got, want float64) bool { return got > want-1 && got <= want+1 }

// /healthcheck and /metrics on the request port.
func TestHealthcheckAndMetrics(t *testing.T) {
	t.Parallel()
	p, _ := serveConfig(t)
	if code, body, _ := httpDo(t, nil, http.MethodGet, "http://"+p.httpAddr+"/healthcheck", nil); code != http.StatusOK || string(body) != "OK" {
		t.Errorf("/healthcheck: %d %q", code, body)
	}
	p.should(d("a", "m"))
	p.should(hits(9, d("a", "m")))
	for _, m := range []struct{ name, labels string }{
		{"ratelimitd_requests_total", `api="grpc",result="ok"`},
		{"ratelimitd_requests_total", `api="grpc",result="over_limit"`},
		{"ratelimitd_healthy", ""},
		{"ratelimitd_config_rules", ""},
		{"ratelimit_decisions_total", `outcome="granted"`},
		{"ratelimit_wal_commits_total", ""},
	} {
		if v := metric(t, p.httpAddr, m.name, m.labels); v < 1 {
			t.Errorf("%s{%s} = %v, want >= 1", m.name, m.labels, v)
		}
	}
}
