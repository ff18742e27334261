// Package httplimit puts a ratelimit.Limiter in front of net/http handlers.
//
// # Basics
//
// Middleware wraps a handler. For every request it computes a key (by
// default the client's IP address, see ClientIP), a cost (by default 1),
// and asks the limiter for cost tokens of each configured limit under that
// key; several limits go through LimitAll, so they are taken all or none.
//
//	mw, err := httplimit.Middleware(l, httplimit.Options{Limits: []string{"api"}})
//	if err != nil { ... }
//	http.ListenAndServe(addr, mw(mux))
//
// # Responses
//
// A granted request reaches the handler; the decision is in its context
// (StatusFromContext). A denied request gets 429 Too Many Requests with
// Retry-After (whole seconds, rounded up: never early) and a small JSON
// body:
//
//	{"error":"rate limited","limit":"api","retry_after_seconds":7}
//
// Both carry the RateLimit-Policy and RateLimit header fields of
// draft-ietf-httpapi-ratelimit-headers (syntax of revisions -08 to -11,
// unchanged since -08): Structured Field Lists whose items are the limit
// names as Strings.
//
//	RateLimit-Policy: "api";q=100;w=60, "global";q=1000;w=1
//	RateLimit: "api";r=0;t=7
//
// RateLimit-Policy lists every limit of the middleware: q is the limit's
// Rate (for a fixed window, at most its Capacity: what a window can grant)
// and w its Period in whole seconds (for a Period that is not a whole
// number of seconds, w is rounded up and q scaled down so that the policy
// never advertises more than the limit grants; both stay within Structured
// Field Integers, 15 digits). RateLimit has one item, for
// the limit that decided (Status.Limit): r is the tokens left, rounded
// down, never negative; t is, on a grant, the seconds until that bucket is
// full again (Status.ResetAfter, rounded up) and, on a denial, the same as
// Retry-After (the draft asks that Retry-After not point before the end of
// the effective window).
//
// # Failing closed
//
// When the limiter cannot decide (it is closed, its write-ahead log failed,
// the request's context ended), the answer is 503 Service Unavailable, never
// a silent pass. Options.FailOpen turns the limiter's own failures (not an
// ended request context) into a pass; it is dangerous: a broken disk then
// disables rate limiting altogether.
//
// Other refusals: a key function error, an empty key or one longer than
// ratelimit.MaxKeyLen is 400 Bad Request; a cost the limit can never grant
// (ratelimit.ErrInvalidCount: more than it can ever grant at once, see
// ratelimit.Request.Count) is 413 Content Too Large; a Cost function that
// returns a negative, NaN or infinite cost is 500. Options.OnError replaces
// all of these responses.
//
// # Caveats
//
// A key is a bucket: keys chosen by the client (a header it sets) let it
// mint fresh buckets at will, so key by authenticated identities, or add a
// per-IP limit. The empty key is the limit's one shared bucket, so key
// functions return an error rather than "". Behind a reverse proxy, the
// remote address is the proxy's: pass the proxy's prefixes to ClientIP.
package httplimit
