// Package bucket is the arithmetic of a rate limit: pure functions from a
// bucket's two numbers (value, ts) and the clock to a decision and the next
// two numbers. Nothing here blocks, allocates or reads a clock, so every rule
// of the limiter's semantics can be tested on its own.
//
// Times are integer Unix nanoseconds; only token amounts are float64.
//
// Token bucket, r = Rate/Period:
//
//	value = min(value + max(0, now-ts)*r, Capacity) - count;  ts = max(ts, now)
//
// Fixed window, k = whole periods elapsed since ts:
//
//	value = min(value + Rate*k, Capacity) - count;  ts = ts + k*Period
//
// A negative value is reserved debt. A time before ts counts as no time at
// all: a clock going backwards neither mints nor destroys tokens, and ts
// never moves back.
//
// Every wait this package computes (RetryAfter) is the earliest time at
// which the same arithmetic says yes: it is never early, and it is verified
// against the decision function itself rather than trusted to floating-point
// algebra.
package bucket
