// Package engine decides rate limit requests for ratelimitd: a request
// names a domain and descriptors (Envoy's model), the loaded
// configuration (package config) says which rule applies to each, and a
// ratelimit.Limiter decides them all or nothing.
//
// # Model
//
// Each descriptor of a request is matched to at most one rule. A
// descriptor that matches nothing, whose rule another matched rule
// replaces, or whose domain is not configured, has no limit and is OK; an
// unlimited rule is OK and counts nothing. Every other descriptor is a
// part of one all-or-nothing call to the limiter: its rule's limit, its
// bucket key, and its hits as the count. The request is granted when
// every part is: then every part is taken; otherwise nothing is.
//
// Three kinds of part cannot deny a request by themselves, so the engine
// decides them with the others and, when the call is denied because of
// them alone, decides it again without them (each retry drops at least
// one part, so a request costs at most one call more than it has such
// parts, and one call when none of them is over its limit):
//
//   - a part with hits 0 is a check: it takes nothing and is within its
//     limit while its bucket holds no debt (envoyproxy/ratelimit: while
//     the count does not exceed the limit), so it is checked for one token
//     and, when that fails, judged by the bucket's value;
//   - a shadow_mode part over its limit is reported OK and does not deny;
//   - quota_mode parts deny the request only when every one of them is
//     over its limit.
//
// A part that could never be granted (hits above what its limit can ever
// hold, or a rule with requests_per_unit 0) is over its limit without
// asking the limiter.
//
// # Failing closed
//
// When the limiter cannot decide (its file failed, it is closed, too many
// keys), Decide returns an error wrapping ErrUnavailable, and Healthy
// reports false once the limiter has failed for good. Options.FailOpen
// answers such requests OK instead: dangerous, since a broken limiter
// then limits nothing. Too many keys (ratelimit.ErrTooManyKeys) is never
// answered OK, so that a flood of keys cannot turn limiting off.
//
// # Bounded cost
//
// Decide refuses, with ErrInvalidRequest, before matching anything: an
// empty domain, no descriptors, more descriptors or entries than
// Options.Limits allow, a domain, key or value longer than allowed or not
// valid UTF-8, hits above MaxHits, and more distinct limit overrides than
// Limits.MaxOverrides.
package engine
