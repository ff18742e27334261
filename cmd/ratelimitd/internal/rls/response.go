package rls

import (
	"math"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/seed7fbd42b6/ratelimit/cmd/ratelimitd/internal/config"
	"github.com/seed7fbd42b6/ratelimit/cmd/ratelimitd/internal/engine"
)

// Response builds the answer to a request decided as res, with the rate
// limit headers h asks for.
func Response(res *engine.Result, h Headers) *rlsv3.RateLimitResponse {
	out := &rlsv3.RateLimitResponse{
		OverallCode: rlsv3.RateLimitResponse_Code(res.Code),
		Statuses:    make([]*rlsv3.RateLimitResponse_DescriptorStatus, len(res.Statuses)),
	}
	for i := range res.Statuses {
		out.Statuses[i] = descriptorStatus(&res.Statuses[i], res.FailedOpen)
	}
	if h != 0 && !res.FailedOpen {
		out.ResponseHeadersToAdd = h.headers(res, out.Statuses)
	}
	return out
}

func descriptorStatus(st *engine.Status, failedOpen bool) *rlsv3.RateLimitResponse_DescriptorStatus {
	switch {
	case failedOpen || st.Kind == engine.NoLimit:
		return &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK}
	case st.Kind == engine.Unlimited:
		return &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK, LimitRemaining: math.MaxUint32}
	}
	return &rlsv3.RateLimitResponse_DescriptorStatus{
		Code:               rlsv3.RateLimitResponse_Code(st.Code),
		CurrentLimit:       currentLimit(st.Limit),
		LimitRemaining:     remaining(st),
		DurationUntilReset: durationpb.New(untilReset(st)),
	}
}

// currentLimit is a rule as Envoy's RateLimit states it.
func currentLimit(l *config.Limit) *rlsv3.RateLimitResponse_RateLimit {
	cl := &rlsv3.RateLimitResponse_RateLimit{
		Name:            l.RuleName,
		RequestsPerUnit: l.RequestsPerUnit,
		Unit:            rlsv3.RateLimitResponse_RateLimit_Unit(l.Unit),
	}
	if l.UnitMultiplier > 1 {
		cl.UnitMultiplier = wrapperspb.UInt32(l.UnitMultiplier)
	}
	return cl
}

// remaining is a limited status's limit_remaining: whole tokens left, 0
// when over the limit (shadow mode included).
func remaining(st *engine.Status) uint32 {
	if st.Code == engine.OverLimit || st.Shadowed || st.Remaining <= 0 {
		return 0
	}
	if st.Remaining >= math.MaxUint32 {
		return math.MaxUint32
	}
	return uint32(st.Remaining)
}

// untilReset is a limited status's duration_until_reset: the exact wait
// of a descriptor over its limit, else when the limit is replenished.
func untilReset(st *engine.Status) time.Duration {
	if (st.Code == engine.OverLimit || st.Shadowed) && !st.Never && st.RetryAfter > 0 {
		return st.RetryAfter
	}
	return st.ResetAfter
}

// header builds one response header.
func header(key, value string) *corev3.HeaderValue {
	return &corev3.HeaderValue{Key: key, Value: value}
}
