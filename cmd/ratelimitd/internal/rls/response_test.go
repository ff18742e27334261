package rls

import (
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/seed7fbd42b6/ratelimit/cmd/ratelimitd/internal/engine"
)

const cfg = `
domain: d
descriptors:
  - key: a
    rate_limit: {unit: minute, requests_per_unit: 10, name: alpha}
  - key: tb
    rate_limit: {algorithm: token_bucket, period: 90s, requests_per_unit: 3}
  - key: free
    rate_limit: {unlimited: true}
`

// Each kind of status as envoyproxy/ratelimit writes it, in proto3 JSON.
func TestResponseStatuses(t *testing.T) {
	ls := limits(t, cfg)
	a, tb, free := ls["d.a"], ls["d.tb"], ls["d.free"]
	cases := []struct {
		name string
		st   engine.Status
		want string
	}{
		{"no limit", engine.Status{Code: engine.OK}, `{"code":"OK"}`},
		{"unlimited", engine.Status{Code: engine.OK, Kind: engine.Unlimited, Limit: free}, `{"code":"OK","limitRemaining":4294967295}`},
		{"within", engine.Status{Code: engine.OK, Kind: engine.Limited, Limit: a, Remaining: 7.5, ResetAfter: 17 * time.Second},
			`{"code":"OK","currentLimit":{"name":"alpha","requestsPerUnit":10,"unit":"MINUTE"},"limitRemaining":7,"durationUntilReset":"17s"}`},
		{"over", engine.Status{Code: engine.OverLimit, Kind: engine.Limited, Limit: a, Remaining: 0.5, RetryAfter: 1500 * time.Millisecond, ResetAfter: time.Minute},
			`{"code":"OVER_LIMIT","currentLimit":{"name":"alpha","requestsPerUnit":10,"unit":"MINUTE"},"durationUntilReset":"1.500s"}`},
		{"never", engine.Status{Code: engine.OverLimit, Kind: engine.Limited, Limit: a, Never: true, ResetAfter: 3 * time.Second},
			`{"code":"OVER_LIMIT","currentLimit":{"name":"alpha","requestsPerUnit":10,"unit":"MINUTE"},"durationUntilReset":"3s"}`},
		{"shadow", engine.Status{Code: engine.OK, Kind: engine.Limited, Limit: a, Shadowed: true, Remaining: 0, RetryAfter: 4 * time.Second, ResetAfter: 4 * time.Second},
			`{"code":"OK","currentLimit":{"name":"alpha","requestsPerUnit":10,"unit":"MINUTE"},"durationUntilReset":"4s"}`},
		{"token bucket", engine.Status{Code: engine.OK, Kind: engine.Limited, Limit: tb, Remaining: 2, ResetAfter: 30 * time.Second},
			`{"code":"OK","currentLimit":{"requestsPerUnit":3,"unit":"SECOND","unitMultiplier":90},"limitRemaining":2,"durationUntilReset":"30s"}`},
		{"huge remaining", engine.Status{Code: engine.OK, Kind: engine.Limited, Limit: a, Remaining: 1e12},
			`{"code":"OK","currentLimit":{"name":"alpha","requestsPerUnit":10,"unit":"MINUTE"},"limitRemaining":4294967295,"durationUntilReset":"0s"}`},
	}
	for _, c := range cases {
		got, err := protojson.Marshal(descriptorStatus(&c.st, false))
		if err != nil {
			t.Fatal(err)
		}
		if string(compact(got)) != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, compact(got), c.want)
		}
	}
}

func TestResponseFailedOpen(t *testing.T) {
	ls := limits(t, cfg)
	res := &engine.Result{Code: engine.OK, FailedOpen: true, Statuses: []engine.Status{{Code: engine.OK, Kind: engine.Limited, Limit: ls["d.a"]}}}
	out := Response(res, HeadersDraft)
	if out.OverallCode != rlsv3.RateLimitResponse_OK || out.Statuses[0].CurrentLimit != nil || out.ResponseHeadersToAdd != nil {
		t.Errorf("%v", out)
	}
}

// compact drops the spaces protojson may insert at random.
func compact(b []byte) []byte {
	out := b[:0:0]
	for _, c := range b {
		if c != ' ' {
			out = append(out, c)
		}
	}
	return out
}
