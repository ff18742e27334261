package main

import (
	"io"
	"math"
	"slices"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

const (
	ok   = rlsv3.RateLimitResponse_OK
	over = rlsv3.RateLimitResponse_OVER_LIMIT
)

// codesOf lists a response's overall code, then each status's.
func codesOf(r *rlsv3.RateLimitResponse) []rlsv3.RateLimitResponse_Code {
	out := []rlsv3.RateLimitResponse_Code{r.OverallCode}
	for _, st := range r.Statuses {
		out = append(out, st.Code)
	}
	return out
}

// Descriptors match rules as envoyproxy/ratelimit matches them: nested,
// wildcard before key-only, unlimited, unmatched; each status as theirs.
func TestShouldRateLimitMatching(t *testing.T) {
	t.Parallel()
	p, _ := serveConfig(t)
	tenYears := &rlsv3.RateLimitResponse_RateLimit{Unit: rlsv3.RateLimitResponse_RateLimit_YEAR, UnitMultiplier: wrapperspb.UInt32(10)}
	cases := []struct {
		name      string
		desc      *ratelimitv3.RateLimitDescriptor
		limit     uint32 // requests_per_unit; 0: no current_limit
		unit      rlsv3.RateLimitResponse_RateLimit_Unit
		remaining uint32
	}{
		{"nested", d("message_type", "marketing", "to_number", "1"), 2, rlsv3.RateLimitResponse_RateLimit_YEAR, 1},
		{"nested, other value", d("message_type", "other", "to_number", "1"), 0, 0, 0},
		{"nested, too short", d("message_type", "marketing"), 0, 0, 0},
		{"wildcard", d("path", "/api/users"), 3, tenYears.Unit, 2},
		{"key only", d("path", "/static/x"), 100, tenYears.Unit, 99},
		{"unlimited", d("free", "x"), 0, 0, math.MaxUint32},
		{"unmatched", d("nothing", "x"), 0, 0, 0},
		{"no entries", d(), 0, 0, 0},
	}
	for _, c := range cases {
		resp := p.should(c.desc)
		st := resp.Statuses[0]
		if resp.OverallCode != ok || st.Code != ok || st.LimitRemaining != c.remaining {
			t.Errorf("%s: %v, want OK with %d remaining", c.name, st, c.remaining)
		}
		switch {
		case c.limit == 0 && (st.CurrentLimit != nil || st.DurationUntilReset != nil):
			t.Errorf("%s: %v, want no limit", c.name, st)
		case c.limit != 0 && (st.CurrentLimit.GetRequestsPerUnit() != c.limit || st.CurrentLimit.Unit != c.unit || st.DurationUntilReset == nil):
			t.Errorf("%s: %v, want %d per %v", c.name, st, c.limit, c.unit)
		}
	}
	if st := p.should(d("path", "/api/x")).Statuses[0]; st.CurrentLimit.GetUnitMultiplier().GetValue() != 10 ||
		st.DurationUntilReset.AsDuration() < 24*time.Hour {
		t.Errorf("a 87600h window: %v, want unit_multiplier 10 (years) and a reset far away", st)
	}
	if st := p.should(d("user", "u")).Statuses[0]; st.CurrentLimit.GetName() != "user" {
		t.Errorf("a named rule: %v, want current_limit.name user", st)
	}
}

// One request is all or nothing: a denied request takes from none of its
// descriptors (envoyproxy/ratelimit would have counted b here), and each
// descriptor has its own status.
func TestShouldRateLimitAtomic(t *testing.T) {
	t.Parallel()
	p, _ := serveConfig(t)
	for i := range 3 {
		if resp := p.should(d("a", "x"), d("b", "x")); resp.OverallCode != ok {
			t.Fatalf("request %d: %v", i+1, resp)
		}
	}
	resp := p.should(d("a", "x"), d("b", "x"))
	if got := codesOf(resp); !slices.Equal(got, []rlsv3.RateLimitResponse_Code{over, over, ok}) {
		t.Fatalf("4th request: %v, want [over over ok]", got)
	}
	a, b := resp.Statuses[0], resp.Statuses[1]
	if a.LimitRemaining != 0 || b.LimitRemaining != 97 || a.DurationUntilReset.AsDuration() < 24*time.Hour {
		t.Errorf("statuses %v %v: want a 0 remaining, reset at the window's end; b 97", a, b)
	}
	if got := p.remaining("b", "x"); got != 97 {
		t.Errorf("b holds %d after the denied request, want 97", got)
	}
}

// hits_addend: the request's, a descriptor's own (which wins, 0
// included), and hits above the limit: OVER_LIMIT, not an error, taking
// nothing.
func TestShouldRateLimitHitsAddend(t *testing.T) {
	t.Parallel()
	p, _ := serveConfig(t)
	resp, err := p.rls.ShouldRateLimit(ctx(t), &rlsv3.RateLimitRequest{Domain: "e2e", HitsAddend: 2,
		Descriptors: []*ratelimitv3.RateLimitDescriptor{d("b", "h"), hits(5, d("path", "/x"))}})
	if err != nil || resp.Statuses[0].LimitRemaining != 98 || resp.Statuses[1].LimitRemaining != 95 {
		t.Fatalf("request hits 2, descriptor 5: %v %v", resp, err)
	}
	// hits 0 checks: OK while within the limit, even with nothing left.
	p.should(hits(3, d("a", "h")))
	resp = p.should(hits(0, d("a", "h")), d("b", "h"))
	if got := codesOf(resp); !slices.Equal(got, []rlsv3.RateLimitResponse_Code{ok, ok, ok}) || resp.Statuses[1].LimitRemaining != 97 {
		t.Fatalf("check of an exhausted bucket with a hit on another: %v", resp)
	}
	// Hits no window could grant.
	resp = p.should(hits(4, d("a", "h2")), d("b", "h"))
	if got := codesOf(resp); !slices.Equal(got, []rlsv3.RateLimitResponse_Code{over, over, ok}) {
		t.Fatalf("4 hits of a 3 limit: %v, want [over over ok]", got)
	}
	if got := p.remaining("a", "h2"); got != 3 {
		t.Errorf("a=h2 holds %d, want 3 (nothing taken)", got)
	}
	if got := p.remaining("b", "h"); got != 97 {
		t.Errorf("b=h holds %d, want 97", got)
	}
}

// replaces drops the named rule; shadow_mode reports OK over its limit
// and does not deny the request.
func TestShouldRateLimitReplacesAndShadow(t *testing.T) {
	t.Parallel()
	p, _ := serveConfig(t)
	resp := p.should(d("user", "alice"), d("vip", "yes"))
	if u := resp.Statuses[0]; u.Code != ok || u.CurrentLimit != nil {
		t.Errorf("replaced user: %v, want {code: OK} alone", u)
	}
	if got := p.remaining("user", "alice"); got != 5 {
		t.Errorf("user=alice holds %d, want 5: a replaced rule takes nothing", got)
	}
	p.should(d("shadow", "s"))
	resp = p.should(d("shadow", "s"), d("b", "s"))
	if got := codesOf(resp); !slices.Equal(got, []rlsv3.RateLimitResponse_Code{ok, ok, ok}) {
		t.Fatalf("over a shadow rule: %v, want all OK", got)
	}
	if sh := resp.Statuses[0]; sh.LimitRemaining != 0 || sh.CurrentLimit == nil {
		t.Errorf("shadow status %v: want 0 remaining and its limit", sh)
	}
	if got := p.remaining("b", "s"); got != 99 {
		t.Errorf("b=s holds %d, want 99: the request was granted", got)
	}
	if n := metric(t, p.httpAddr, "ratelimitd_descriptors_total", `outcome="shadow_over_limit"`); n != 1 {
		t.Errorf("shadow_over_limit %v, want 1", n)
	}
}

// A request's own limit (descriptor.limit) applies in a configured
// domain; one without a unit is InvalidArgument, where
// envoyproxy/ratelimit's process dies.
func TestShouldRateLimitOverride(t *testing.T) {
	t.Parallel()
	p, _ := serveConfig(t)
	o := d("anything", "x")
	o.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 2, Unit: typev3.RateLimitUnit_YEAR}
	for i, want := range []rlsv3.RateLimitResponse_Code{ok, ok, over} {
		if st := p.should(o).Statuses[0]; st.Code != want || st.CurrentLimit.GetRequestsPerUnit() != 2 {
			t.Errorf("hit %d: %v, want %v", i+1, st, want)
		}
	}
	bad := d("anything", "x")
	bad.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 2}
	_, err := p.rls.ShouldRateLimit(ctx(t), &rlsv3.RateLimitRequest{Domain: "e2e", Descriptors: []*ratelimitv3.RateLimitDescriptor{bad}})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("override without a unit: %v, want InvalidArgument", err)
	}
	if p.health("") != healthpb.HealthCheckResponse_SERVING {
		t.Error("not serving after the bad override")
	}
}

// Rate limit headers in response_headers_to_add, for the status with the
// fewest remaining, or the one over its limit.
func TestShouldRateLimitHeaders(t *testing.T) {
	t.Parallel()
	p, _ := serveConfig(t, "-response-headers", "draft,x,envoy")
	headers := func(r *rlsv3.RateLimitResponse) map[string]string {
		m := make(map[string]string)
		for _, h := range r.ResponseHeadersToAdd {
			m[h.Key] = h.Value
		}
		return m
	}
	h := headers(p.should(d("b", "hd"), d("a", "hd")))
	if h["RateLimit-Limit"] != "3" || h["RateLimit-Remaining"] != "2" || h["X-RateLimit-Remaining"] != "2" ||
		h["RateLimit-Policy"] != `"e2e.a";q=3;w=315360000` || h["X-RateLimit-Limit"] != "3, 100;w=315360000, 3;w=315360000" {
		t.Errorf("headers %v", h)
	}
	p.should(hits(2, d("a", "hd")))
	h = headers(p.should(d("a", "hd"), d("b", "hd")))
	if h["RateLimit-Remaining"] != "0" || h["RateLimit"] == "" || h["RateLimit-Reset"] == "" || h["RateLimit-Reset"] == "0" {
		t.Errorf("over the limit: headers %v", h)
	}
	if len(p.should(d("nothing", "x")).ResponseHeadersToAdd) != 0 {
		t.Error("headers for a request no rule limits")
	}
}

// An unknown domain is answered OK (no limit), counted and logged once;
// -unknown-domain-error refuses it.
func TestShouldRateLimitUnknownDomain(t *testing.T) {
	t.Parallel()
	p, _ := serveConfig(t)
	for range 3 {
		resp, err := p.rls.ShouldRateLimit(ctx(t), &rlsv3.RateLimitRequest{Domain: "typo", Descriptors: []*ratelimitv3.RateLimitDescriptor{d("a", "x")}})
		if err != nil || resp.OverallCode != ok || resp.Statuses[0].CurrentLimit != nil {
			t.Fatalf("unknown domain: %v %v", resp, err)
		}
	}
	if n := metric(t, p.httpAddr, "ratelimitd_unknown_domain_requests_total", ""); n != 3 {
		t.Errorf("unknown domain metric %v, want 3", n)
	}
	if n := len(p.logs.find("domain the configuration does not have")); n != 1 {
		t.Errorf("logged %d times, want once", n)
	}
	strict, _ := serveConfig(t, "-unknown-domain-error")
	_, err := strict.rls.ShouldRateLimit(ctx(t), &rlsv3.RateLimitRequest{Domain: "typo", Descriptors: []*ratelimitv3.RateLimitDescriptor{d("a", "x")}})
	if status.Code(err) != codes.NotFound {
		t.Errorf("-unknown-domain-error: %v, want NotFound", err)
	}
}

// gRPC health reports SERVING under the names Envoy and
// envoyproxy/ratelimit use, and reflection lists the service.
func TestHealthAndReflection(t *testing.T) {
	t.Parallel()
	p, _ := serveConfig(t)
	for _, s := range []string{"", "ratelimit", "envoy.service.ratelimit.v3.RateLimitService"} {
		if got := p.health(s); got != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health %q: %v", s, got)
		}
	}
	stream, err := reflectionpb.NewServerReflectionClient(p.conn).ServerReflectionInfo(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.Name)
	}
	if !slices.Contains(names, "envoy.service.ratelimit.v3.RateLimitService") || !slices.Contains(names, "grpc.health.v1.Health") {
		t.Errorf("reflection lists %v", names)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_FileContainingSymbol{
		FileContainingSymbol: "envoy.service.ratelimit.v3.RateLimitService"}}); err != nil {
		t.Fatal(err)
	}
	if resp, err := stream.Recv(); err != nil || len(resp.GetFileDescriptorResponse().GetFileDescriptorProto()) == 0 {
		t.Errorf("reflection of the RLS service: %v %v", resp, err)
	}
	stream.CloseSend()
	if _, err := stream.Recv(); err != io.EOF {
		t.Logf("reflection stream end: %v", err)
	}
}
