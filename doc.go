// Package ratelimit is an application-layer rate limiter that is durable,
// exact and fast: token buckets and fixed windows per key, multi-token
// requests, reservations, sharding for hot limits, and all-or-nothing use
// of several limits, with every grant on disk before it is acknowledged.
//
// # Model
//
// Every limit is a set of buckets, one per key (and per shard). A bucket
// stores two numbers: value (tokens; negative is reserved debt) and ts. An
// absent bucket is a full one, so idle keys cost nothing. The arithmetic is
// Convex's rate limiter's, stated exactly in package bucket.
//
// Buckets live on actor partitions (package actor): each owns its table of
// states outright and is executed by one goroutine at a time (its own, or
// a caller that found it idle and decides inline), deciding the requests
// queued to it in batches, with one clock reading per batch. A request on
// several buckets that live on different partitions runs an ordered
// two-phase reservation.
//
// # Durability
//
// With Options.Path set, each grant, reservation and reset becomes a record
// of the bucket's resulting absolute state, group-committed to a write-ahead
// log in a bbolt file (package wal) before the caller hears "ok" (a bucket
// written several times in one partition batch is recorded once, with its
// last state: replay needs no more). Snapshots
// (package snapshot) bound the log; Open recovers snapshot + log tail. A
// crash loses no acknowledged grant (a grant in flight may or may not
// survive; either way no one was told it happened).
//
// # Guarantees
//
//   - Never over-admits: across any span, restarts and concurrency included,
//     granted tokens stay within capacity + rate*elapsed (token bucket) or the
//     window bound (fixed window).
//   - Fails closed: if a decision cannot be made or persisted, the answer is
//     an error, never a silent grant. After a failed commit the limiter
//     refuses every further grant (ErrUnavailable) until reopened.
//   - Exact: with a frozen clock, a bucket's value is capacity minus the sum
//     of acknowledged grants, under any concurrency: bit for bit when the
//     counts and per-shard capacities are integers (float sums of fractions
//     may round differently in another order).
//   - Errors are for requests that cannot be decided (bad input: ErrInvalidCount,
//     ErrInvalidConfig, ErrInvalidKey, ErrUnknownLimit; ErrClosed; a
//     context's error, returned unwrapped; ErrUnavailable). An error
//     consumes nothing, with two exceptions, both of which can only
//     under-admit: a request whose context ends after a partition took it
//     up may still be granted, and a grant answered ErrUnavailable because
//     its commit failed stays counted until reopening (and after, if its
//     record reached the disk). A denial is Status.OK == false with a nil
//     error.
//
// # Concurrency
//
// A Limiter is safe for concurrent use by any number of goroutines. Calls
// never deadlock, including LimitAll calls on overlapping limits in any
// order.
//
// # Time
//
// All times are integer nanoseconds; a clock going backwards neither mints
// nor destroys tokens. Options.Now makes the clock injectable for tests.
package ratelimit
