package rls

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/seed7fbd42b6/ratelimit/cmd/ratelimitd/internal/config"
	"github.com/seed7fbd42b6/ratelimit/cmd/ratelimitd/internal/engine"
)

// Headers selects the rate limit headers a response carries; the zero
// value, none (envoyproxy/ratelimit's default).
type Headers uint8

// The header sets.
const (
	// HeadersDraft: RateLimit-Policy and RateLimit, as the IETF httpapi
	// working group's ratelimit-headers draft writes them:
	// `"NAME";q=LIMIT;w=WINDOW` and `"NAME";r=REMAINING;t=RESET`.
	HeadersDraft Headers = 1 << iota
	// HeadersX: X-RateLimit-Limit ("LIMIT, LIMIT;w=WINDOW" with a policy
	// per limited descriptor, as Envoy's filter writes it),
	// X-RateLimit-Remaining and X-RateLimit-Reset.
	HeadersX
	// HeadersEnvoy: RateLimit-Limit, RateLimit-Remaining and
	// RateLimit-Reset, as envoyproxy/ratelimit writes them with
	// LIMIT_RESPONSE_HEADERS_ENABLED.
	HeadersEnvoy
)

// ParseHeaders reads a comma-separated list of "draft", "x" and "envoy";
// "" and "none" select none.
func ParseHeaders(s string) (Headers, error) {
	var h Headers
	for _, f := range strings.Split(s, ",") {
		switch strings.TrimSpace(f) {
		case "", "none":
		case "draft":
			h |= HeadersDraft
		case "x":
			h |= HeadersX
		case "envoy":
			h |= HeadersEnvoy
		default:
			return 0, fmt.Errorf("unknown header set %q (draft, x, envoy or none)", f)
		}
	}
	return h, nil
}

// headers builds the headers h asks for, from the status
// envoyproxy/ratelimit chooses; none when no descriptor is limited.
func (h Headers) headers(res *engine.Result, sts []*rlsv3.RateLimitResponse_DescriptorStatus) []*corev3.HeaderValue {
	chosen := -1
	for i, st := range sts {
		if st.CurrentLimit != nil && (chosen < 0 || st.LimitRemaining < sts[chosen].LimitRemaining) {
			chosen = i
		}
	}
	for i, st := range sts {
		if st.Code == rlsv3.RateLimitResponse_OVER_LIMIT && !res.Statuses[i].Limit.QuotaMode {
			chosen = i
		}
	}
	if chosen < 0 {
		return nil
	}
	st, l := sts[chosen], res.Statuses[chosen].Limit
	limit := strconv.FormatUint(uint64(l.RequestsPerUnit), 10)
	left := strconv.FormatUint(uint64(st.LimitRemaining), 10)
	reset := strconv.FormatInt(ceilSeconds(st.DurationUntilReset.AsDuration()), 10)
	var out []*corev3.HeaderValue
	if h&HeadersDraft != 0 {
		name := policyName(l)
		out = append(out,
			header("RateLimit-Policy", fmt.Sprintf("%s;q=%d;w=%d", name, l.RequestsPerUnit, ceilSeconds(window(l)))),
			header("RateLimit", fmt.Sprintf("%s;r=%s;t=%s", name, left, reset)))
	}
	if h&HeadersX != 0 {
		var b strings.Builder
		b.WriteString(limit)
		for i, s := range sts {
			if s.CurrentLimit == nil {
				continue
			}
			li := res.Statuses[i].Limit
			fmt.Fprintf(&b, ", %d;w=%d", li.RequestsPerUnit, ceilSeconds(window(li)))
			if li.RuleName != "" {
				fmt.Fprintf(&b, ";name=%s", sfString(li.RuleName))
			}
		}
		out = append(out, header("X-RateLimit-Limit", b.String()),
			header("X-RateLimit-Remaining", left), header("X-RateLimit-Reset", reset))
	}
	if h&HeadersEnvoy != 0 {
		out = append(out, header("RateLimit-Limit", limit),
			header("RateLimit-Remaining", left), header("RateLimit-Reset", reset))
	}
	return out
}

// window is the length a limit counts requests_per_unit over.
func window(l *config.Limit) time.Duration {
	if l.Unit != config.UnitUnknown {
		return l.Unit.Duration() * time.Duration(max(l.UnitMultiplier, 1))
	}
	return l.Config.Period
}

// ceilSeconds is d in whole seconds, rounded up: a reset never early.
func ceilSeconds(d time.Duration) int64 {
	s := int64(d / time.Second)
	if d%time.Second > 0 {
		s++
	}
	return s
}

// policyName names a limit in the draft's headers: its rule name, else
// its stats key, as a structured-field string.
func policyName(l *config.Limit) string {
	if l.RuleName != "" {
		return sfString(l.RuleName)
	}
	return sfString(l.StatsKey)
}

// sfString quotes s as a structured-field string (RFC 8941): printable
// ASCII, with '"' and '\' escaped; other bytes become '?'.
func sfString(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c > 0x7e:
			b.WriteByte('?')
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}
