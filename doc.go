// Package ratelimit is an application-layer rate limiter that is durable,
// exact and fast: token buckets and fixed windows per key, multi-token
// requests, reservations, sharding for hot limits, and all-or-nothing use
// of several limits, with every grant on disk before it is acknowledged.
//
// # Model
//
// A limit (Config) is a set of buckets, one per key (and per shard). A
// bucket stores two numbers: value (tokens; negative is reserved debt) and
// ts. An absent bucket is a full one, so idle keys cost nothing. The
// arithmetic is Convex's rate limiter's, with the changes and every
// decision stated in docs/SEMANTICS.md of the repository.
//
// Buckets live on partitions: each owns its buckets outright and is run by
// one goroutine at a time (its own, or a caller that found it idle and
// decides on its own goroutine), deciding the requests queued to it in
// batches, with one clock reading per batch. A request on several buckets
// that live on different partitions runs an ordered two-phase reservation.
//
// # Durability
//
// With Options.Path set, each grant, reservation, credit and reset becomes
// a record of the bucket's resulting state, group-committed to a
// write-ahead log in a bbolt file before the caller hears "ok". Snapshots
// bound the log; Open recovers the last snapshot and the log after it. A
// crash loses no acknowledged grant (a grant in flight may or may not
// survive; either way no one was told it happened).
//
// Every durable grant waits for one commit (a bbolt transaction: two
// fsyncs, the pages then the meta page): a caller alone sees
// that latency on every grant, and throughput comes from concurrency, as
// concurrent callers share commits. Denials and checks wait for none.
//
// Open checks the file's structure before using it: a damaged, truncated
// or foreign file is an error (ErrCorrupt), never a crash and never a
// partly recovered state; Salvage reads what can be read of it into a new
// file. The file grows to the largest size its log and snapshot have
// needed and does not shrink; Salvage of an intact file also compacts it.
//
// # Guarantees
//
//   - Never over-admits: across any span, restarts and concurrency included,
//     granted tokens stay within capacity + rate*elapsed (token bucket) or
//     the window bound (fixed window).
//   - Fails closed: if a decision cannot be made or persisted, the answer is
//     an error, never a silent grant. After a failed commit the limiter
//     refuses every further grant (ErrUnavailable) until it is reopened.
//   - Exact: with a frozen clock, a bucket's value is capacity minus the sum
//     of acknowledged grants, under any concurrency (bit for bit when the
//     counts and per-shard capacities are integers).
//   - Bounded: Options.MaxBuckets bounds the buckets held; a request that
//     needs one more is refused (ErrTooManyKeys) while held keys go on.
//   - Errors are for requests that cannot be decided (bad input:
//     ErrInvalidCount, ErrInvalidConfig, ErrInvalidKey, ErrUnknownLimit;
//     ErrClosed; ErrTooManyKeys; ErrUnavailable; a context's error, returned
//     unwrapped). An error consumes nothing, with two exceptions, both of
//     which can only under-admit: a request whose context ends after a
//     partition took it up may still be granted, and a grant answered
//     ErrUnavailable because its commit failed stays counted until
//     reopening (and after, if its record reached the disk). On Redis
//     (package redislimit) a Credit answered ErrUnavailable may have been
//     applied with its reply lost: retrying it can credit twice. A denial
//     is Status.OK == false with a nil error.
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
// nor destroys tokens. Options.Now makes the clock injectable for tests
// (package ratelimittest has a settable clock).
//
// # Sharing limits between processes
//
// A Limiter keeps its buckets in its own process (and file). Several
// processes that must share limits open their Limiters on one Redis server
// or cluster instead, with package redislimit (its own module): the same
// API and semantics, decided by a function library on the server.
package ratelimit
