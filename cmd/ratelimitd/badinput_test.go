package main

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// rawCodec sends a request's bytes as they are, so that a test can send
// what the generated client refuses to encode.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*[]byte))}, nil
}
func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return proto.Unmarshal(data.Materialize(), v.(proto.Message))
}
func (rawCodec) Name() string { return "proto" }

// Bad input gets a clear error (InvalidArgument; ResourceExhausted for an
// oversized message) at a bounded cost, and the server serves on.
func TestBadInputGRPC(t *testing.T) {
	t.Parallel()
	p, _ := serveConfig(t)
	many := make([]*ratelimitv3.RateLimitDescriptor, 65)
	for i := range many {
		many[i] = d("a", "x")
	}
	entries := make([]string, 66)
	for i := range entries {
		entries[i] = "k"
	}
	neg := d("a", "x")
	neg.IsNegativeHits = true
	cases := []struct {
		name string
		req  *rlsv3.RateLimitRequest
		want codes.Code
	}{
		{"empty domain", &rlsv3.RateLimitRequest{Descriptors: []*ratelimitv3.RateLimitDescriptor{d("a", "x")}}, codes.InvalidArgument},
		{"no descriptors", &rlsv3.RateLimitRequest{Domain: "e2e"}, codes.InvalidArgument},
		{"65 descriptors", &rlsv3.RateLimitRequest{Domain: "e2e", Descriptors: many}, codes.InvalidArgument},
		{"33 entries", &rlsv3.RateLimitRequest{Domain: "e2e", Descriptors: []*ratelimitv3.RateLimitDescriptor{d(entries...)}}, codes.InvalidArgument},
		{"long key", &rlsv3.RateLimitRequest{Domain: "e2e", Descriptors: []*ratelimitv3.RateLimitDescriptor{d(strings.Repeat("k", 4097), "x")}}, codes.InvalidArgument},
		{"long value", &rlsv3.RateLimitRequest{Domain: "e2e", Descriptors: []*ratelimitv3.RateLimitDescriptor{d("a", strings.Repeat("v", 4097))}}, codes.InvalidArgument},
		{"hits beyond 2^53", &rlsv3.RateLimitRequest{Domain: "e2e", Descriptors: []*ratelimitv3.RateLimitDescriptor{hits(1<<60, d("a", "x"))}}, codes.InvalidArgument},
		{"negative hits", &rlsv3.RateLimitRequest{Domain: "e2e", Descriptors: []*ratelimitv3.RateLimitDescriptor{neg}}, codes.InvalidArgument},
		{"2 MiB message", &rlsv3.RateLimitRequest{Domain: "e2e", Descriptors: []*ratelimitv3.RateLimitDescriptor{d("a", strings.Repeat("v", 2<<20))}}, codes.ResourceExhausted},
	}
	for _, c := range cases {
		_, err := p.rls.ShouldRateLimit(ctx(t), c.req)
		if status.Code(err) != c.want {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	raw := []struct {
		name string
		msg  []byte
	}{
		{"invalid UTF-8", protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "e2e\xff")},
		{"not protobuf", []byte{0xff, 0xff, 0xff, 0xff}},
	}
	for _, c := range raw {
		err := p.conn.Invoke(ctx(t), "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit", &c.msg,
			new(rlsv3.RateLimitResponse), grpc.ForceCodecV2(rawCodec{}))
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want InvalidArgument", c.name, err)
		}
	}
	if p.health("") != healthpb.HealthCheckResponse_SERVING || p.should(d("a", "x")).OverallCode != ok {
		t.Error("the server does not serve after the bad input")
	}
	if n := metric(t, p.httpAddr, "ratelimitd_requests_total", `api="grpc",result="invalid"`); n != float64(len(cases)+len(raw)-1) {
		t.Errorf("invalid requests counted %v, want %d (the oversized one never reaches the service)", n, len(cases)+len(raw)-1)
	}
}

func TestBadInputHTTP(t *testing.T) {
	t.Parallel()
	p, _ := serveConfig(t)
	huge := `{"domain":"e2e","descriptors":[{"entries":[{"key":"a","value":"` + strings.Repeat("v", 2<<20) + `"}]}]}`
	cases := []struct {
		path, body string
		want       int
	}{
		{"/json", huge, http.StatusRequestEntityTooLarge},
		{"/json", `{"domain":"e2e\xff","descriptors":[{"entries":[{"key":"a","value":"x"}]}]}`, http.StatusBadRequest},
		{"/json", `{"domain":"e2e","hitsAddend":8589934592,"descriptors":[{"entries":[{"key":"a","value":"x"}]}]}`, http.StatusBadRequest},
		{"/json", `{"domain":"e2e","descriptors":[{"entries":[{"key":"a","value":"x"}],"hitsAddend":"1152921504606846976"}]}`, http.StatusBadRequest},
		{"/v1/limit", huge, http.StatusRequestEntityTooLarge},
		{"/v1/limit", `{"domain":"e2e","descriptors":[{"entries":[{"key":"a","value":"x\xff"}]}]}`, http.StatusBadRequest},
		{"/v1/limit", `{"domain":"e2e","descriptors":[{"entries":[{"key":"a","value":"x"}],"hits":1e30}]}`, http.StatusBadRequest},
		{"/v1/limit", `{"domain":"e2e","descriptors":[{"entries":[{"key":"a","value":"x"}],"hits":1152921504606846976}]}`, http.StatusBadRequest},
		{"/v1/limit", `[]`, http.StatusBadRequest},
		{"/v1/limit", `{"domain":"e2e","descriptors":[{"entries":[{"key":"a","value":"x"}],"hits":2}],"re\u017ferve":true}`, http.StatusBadRequest},
		{"/v1/limit", `{"domain":"e2e","descriptors":[{"entries":[{"key":"a","value":"\ud800"}]}]}`, http.StatusBadRequest},
		{"/v1/limit", `{"domain":"e2e","descriptors":` + strings.Repeat("[", 1<<20-100), http.StatusBadRequest},
		{"/v1/value", `{"domain":"e2e","entries":[` + strings.Repeat("{},", 300_000) + `{}]}`, http.StatusBadRequest},
		{"/json", `{"domain":"e2e","descriptors":[{"entries":[{"key":"a","value":"\udc00"}]}]}`, http.StatusBadRequest},
	}
	for _, c := range cases {
		code, out, _ := httpDo(t, nil, http.MethodPost, "http://"+p.httpAddr+c.path, []byte(c.body))
		if code != c.want || !bytes.Contains(out, []byte(`"error"`)) {
			t.Errorf("%s %.80s: %d %.200s, want %d with an error", c.path, c.body, code, out, c.want)
		}
	}
	if got := p.remaining("a", "x"); got != 3 {
		t.Errorf("a=x holds %d, want 3: no bad request took anything", got)
	}
}
