// Package rls translates between Envoy's rate limit service protocol
// (envoy.service.ratelimit.v3, as generated in go-control-plane) and the
// engine: a RateLimitRequest into an engine.Request, and an
// engine.Result into a RateLimitResponse with envoyproxy/ratelimit's
// conventions:
//
//   - a descriptor no rule limits (unmatched, replaced, unknown domain,
//     or the limiter failed open) is {code: OK} and nothing else;
//   - an unlimited rule is OK with limit_remaining 4294967295;
//   - a limited descriptor carries current_limit (requests_per_unit,
//     unit, unit_multiplier when not 1, and the rule's name),
//     limit_remaining (0 when over its limit, and for a shadow_mode rule
//     over it) and duration_until_reset: the exact wait until the same
//     descriptor passes when it is over its limit, else the time until
//     its window ends (fixed window) or its bucket is full (token bucket);
//   - hits_addend: a descriptor's own, when set (0 included), else the
//     request's, 0 meaning 1.
//
// Rate limit headers (Headers) are added to response_headers_to_add from
// the status envoyproxy/ratelimit chooses: the limited one with the
// fewest remaining, unless a descriptor outside quota_mode is over its
// limit (the last such one).
package rls
