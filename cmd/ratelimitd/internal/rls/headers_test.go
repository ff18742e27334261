package rls

import (
	"testing"
	"time"

	"github.com/seed7fbd42b6/ratelimit/cmd/ratelimitd/internal/engine"
)

func TestParseHeaders(t *testing.T) {
	cases := map[string]Headers{"": 0, "none": 0, "draft": HeadersDraft, "x, envoy": HeadersX | HeadersEnvoy}
	for s, want := range cases {
		if got, err := ParseHeaders(s); err != nil || got != want {
			t.Errorf("ParseHeaders(%q) = %v, %v, want %v", s, got, err, want)
		}
	}
	if _, err := ParseHeaders("ietf"); err == nil {
		t.Error(`ParseHeaders("ietf") succeeded`)
	}
}

// The headers describe the limited status with the fewest remaining,
// unless one outside quota mode is over its limit.
func TestHeaders(t *testing.T) {
	ls := limits(t, `
domain: d
descriptors:
  - key: a
    rate_limit: {unit: minute, requests_per_unit: 10, name: alpha}
  - key: b
    rate_limit: {unit: hour, requests_per_unit: 100}
  - key: q
    quota_mode: true
    rate_limit: {unit: second, requests_per_unit: 1}
`)
	a := engine.Status{Code: engine.OK, Kind: engine.Limited, Limit: ls["d.a"], Remaining: 4, ResetAfter: 1500 * time.Millisecond}
	b := engine.Status{Code: engine.OK, Kind: engine.Limited, Limit: ls["d.b"], Remaining: 50, ResetAfter: time.Hour}
	bOver := engine.Status{Code: engine.OverLimit, Kind: engine.Limited, Limit: ls["d.b"], RetryAfter: 30 * time.Minute}
	qOver := engine.Status{Code: engine.OverLimit, Kind: engine.Limited, Limit: ls["d.q"], RetryAfter: time.Second}
	none := engine.Status{Code: engine.OK}
	cases := []struct {
		name string
		h    Headers
		sts  []engine.Status
		want map[string]string
	}{
		{"fewest remaining", HeadersEnvoy, []engine.Status{b, a, none},
			map[string]string{"RateLimit-Limit": "10", "RateLimit-Remaining": "4", "RateLimit-Reset": "2"}},
		{"over wins", HeadersEnvoy, []engine.Status{a, bOver},
			map[string]string{"RateLimit-Limit": "100", "RateLimit-Remaining": "0", "RateLimit-Reset": "1800"}},
		{"quota over does not", HeadersEnvoy, []engine.Status{qOver, b},
			map[string]string{"RateLimit-Limit": "1", "RateLimit-Remaining": "0", "RateLimit-Reset": "1"}},
		{"draft", HeadersDraft, []engine.Status{a, b},
			map[string]string{"RateLimit-Policy": `"alpha";q=10;w=60`, "RateLimit": `"alpha";r=4;t=2`}},
		{"draft unnamed", HeadersDraft, []engine.Status{b},
			map[string]string{"RateLimit-Policy": `"d.b";q=100;w=3600`, "RateLimit": `"d.b";r=50;t=3600`}},
		{"x", HeadersX, []engine.Status{b, a},
			map[string]string{"X-RateLimit-Limit": `10, 100;w=3600, 10;w=60;name="alpha"`, "X-RateLimit-Remaining": "4", "X-RateLimit-Reset": "2"}},
		{"no limit", HeadersDraft | HeadersX | HeadersEnvoy, []engine.Status{none}, map[string]string{}},
	}
	for _, c := range cases {
		out := Response(&engine.Result{Code: engine.OK, Statuses: c.sts}, c.h)
		got := make(map[string]string)
		for _, hv := range out.ResponseHeadersToAdd {
			got[hv.Key] = hv.Value
		}
		if len(got) != len(c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
			continue
		}
		for k, v := range c.want {
			if got[k] != v {
				t.Errorf("%s: %s = %q, want %q", c.name, k, got[k], v)
			}
		}
	}
}

func TestSFString(t *testing.T) {
	cases := map[string]string{`a`: `"a"`, `a"b\c`: `"a\"b\\c"`, "é\x01": `"???"`}
	for in, want := range cases {
		if got := sfString(in); got != want {
			t.Errorf("sfString(%q) = %s, want %s", in, got, want)
		}
	}
}
