// Package redislimit keeps a ratelimit.Limiter's buckets on Redis (7.0 or
// later, or Valkey), a single server or a Redis Cluster, so that many
// processes share their limits.
//
//	client := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
//	l, err := redislimit.Open(client, ratelimit.Options{Limits: limits})
//
// Open returns the same *ratelimit.Limiter as ratelimit.Open: Limit,
// Check, LimitAll, LimitMany, Reset, Value, Credit, Stats, Close and
// package httplimit work unchanged, with the same semantics and the same
// errors. Limiters opened with the same KeyPrefix on the same servers
// share their buckets.
//
// # Guarantees
//
//   - Exact: every decision is the one the in-memory limiter makes from
//     the same bucket states at the same time. A Redis function decides
//     with arithmetic that mirrors package internal/bucket operation for
//     operation, in doubles; this package replays each decision on the
//     states the function reports, fills RetryAfter, Remaining and
//     ResetAfter with package bucket's exact waits, and fails a call whose
//     replay disagrees.
//   - Durable on the primary: a grant is acknowledged after the master
//     has written it to its append-only file with appendfsync always (Open
//     checks; see Failures). After a crash and restart every acknowledged
//     grant still counts.
//   - Replication is asynchronous: a failover to a replica can lose the
//     last grants the old primary acknowledged, and the limiter then
//     over-admits by at most what they took.
//   - Fails closed: a call that Redis did not answer as expected (an
//     error, a timeout, a reply that does not parse) is ErrUnavailable and
//     grants nothing. Such a call may still have been decided on the
//     server (its reply was lost): for a grant that can only under-admit,
//     but a Credit may have been applied, and retrying it can credit
//     twice (over-admitting by the credit). go-redis never retries the
//     store's calls for that reason.
//   - Bad input is rejected before anything is sent, with the local
//     limiter's sentinels.
//
// # Time
//
// By default a call is decided at its master's clock (TIME), read once
// per function call, so that clients' clocks cannot mint tokens. On a
// cluster each master decides its slots on its own clock; a call across
// slots decides each part at its master's time (see Calls across slots).
// Options.Now, when set, supplies the time instead, read once per round
// of calls (tests; deployments that trust their clocks, which must then
// agree across processes).
//
// Times cross to the function as (us, rem): whole microseconds since the
// Unix epoch and the nanoseconds beyond, two integers a double holds
// exactly; every rule is decided at nanosecond precision, as in memory.
// Within these bounds all the arithmetic stays exact: the clock must lie
// between 1970 and 2112 (a call outside fails with ErrUnavailable), and a
// fixed window's period between a microsecond and about 35.7 years (see
// MaxWindow; other periods are ErrInvalidConfig, at Open for
// Options.Limits, at use for inline configs).
//
// # Keys
//
// A bucket is one string key, absent while the bucket is full:
//
//	<prefix>{<tag>}<shard>:<len(name)>:<name><key>  24 bytes: value, us, rem, little-endian doubles
//	                                                 then, on a bucket a hold wrote, its room record
//
// (decimal shard and name length; name and key of any bytes). The tag is
// one of Slots hash tags, tags[(hash(name, key) + shard/2) mod Slots]: the
// key's Redis Cluster slot. All buckets of a tag share a slot, so one
// function call decides a batch of them; shards 2k and 2k+1 of a key share
// a tag, so a request's two choices are one decision; and consecutive
// pairs of a hot sharded key sit on consecutive tags, spread over
// masters. The tags' slots are the middles of the 64 equal ranges of the
// slot space, so any even split of the slots over masters gives each
// master as many tags as any other, give or take one: enough to spread
// over masters, few enough that on a cluster each call still carries many
// requests.
// The tags, and so the layout, are fixed: every process sharing a server
// computes the same keys whatever its settings.
//
// A tag's other keys: <prefix>{<tag>}d, the latest clock reading at which,
// or ts with which, a full bucket was deleted there (an absent bucket is
// fresh as of the later of it and now, so a clock going back cannot count
// a refill twice), and the number of the tag's last hold;
// <prefix>{<tag>}x, the expiry index (with Options.Now only); and
// <prefix>{<tag>}h:<id>, a hold of a call across slots (its number).
// Processes sharing a server must run the same version of this package: a
// version that does not know a key's layout refuses it (ErrUnavailable),
// failing closed.
//
// # Batching
//
// Requests queue per tag. A tag has at most one batch in flight: the
// requests queued meanwhile form its next batch, decided in order,
// atomically, each seeing the grants before it. A round sends the batches
// of every tag with requests waiting: on a cluster one function call per
// tag (its keys share a slot), pipelined in one exchange that go-redis
// splits by master; on a single server one function call for all of them.
// Two rounds may be in flight at once; a caller that finds fewer runs one
// itself, so an idle store adds no goroutine switch. A caller whose
// context can end leaves its round to a sender goroutine instead, so that
// it stops waiting as soon as the context ends, however long the server
// takes to answer (its request may still be granted there: that can only
// under-admit).
//
// # Calls across slots
//
// An atomic call (LimitAll, or a sharded request whose two shards sit on
// two tags: only the lone last shard of an odd Shards count) whose buckets
// share a tag is one function call. Otherwise phase one visits its tags
// in ascending order, one call each: the call's members there are decided
// against the buckets' current states and, if all are granted, their
// tokens are taken and a hold is recorded (a key that expires after
// HoldTimeout). A denial stops phase one; phase two then gives back what
// the earlier tags took (the bucket's state before the call if nothing
// changed it since, else a credit capped at capacity) and drops their
// holds; when every tag granted, it drops the holds (in the background,
// with the tags' next calls: the caller waits for phase one only). The
// last tag needs no hold. Nothing waits inside a function, so nothing
// deadlocks; a request that meets another's hold is decided against the
// tokens already taken; a client that stops between the phases leaves its
// tokens taken (under-admission only), and its holds expire. What phase
// two gives back is capped by the least room (capacity minus value) the
// bucket has had since the hold: if a refill, a credit or a Reset brought
// it to capacity meanwhile, the tokens held no longer count, and giving
// them back would over-admit. A bucket a hold wrote keeps a short record
// of its room for that (a few hundred bytes at most). A two-choice request
// across tags holds on its first shard what it may take there, and its
// second tag decides the pair (then phase two gives the first shard back
// what the decision did not use). A tag's part of an atomic call is one
// function call, so it may name at most 32,768 buckets (a bucket named
// again counts again): a larger call is ratelimit.ErrTooLarge, with
// nothing taken.
//
// # Expiry
//
// A bucket's key expires once the bucket would be full again, never
// before, so Redis memory follows active keys: on the servers' clock a
// key gets an absolute expiry (PXAT) within two milliseconds after its
// refill; with Options.Now there is no server-side expiry (a key must
// outlive a clock that stands still), and instead each call on a tag first
// deletes the tag's buckets that are full by that clock (at most 64 per
// call), from the tag's expiry index.
//
// # Failures
//
// Open checks every master: appendonly yes, appendfsync always and
// no-appendfsync-on-rewrite no (else ErrServerConfig, unless
// AllowNotDurable), maxmemory-policy noeviction
// (else ErrServerConfig, unless AllowEviction; an evicted bucket reads as
// full). Where CONFIG is unavailable (managed Redis) the error names
// SkipConfigCheck. Open then loads the function library (FUNCTION LOAD,
// named after its source's hash): the library persists with the data and
// reaches replicas; a server that lacks it (functions flushed) gets it
// loaded again and the call is retried, once. A master out of memory
// refuses every call, reads included.
//
// # Caveats
//
//   - Stats counts the decisions of this Limiter only; LiveBuckets is not
//     known (it is zero).
//   - A request across slots costs one round trip per tag, plus one for
//     phase two when it is denied (or splits a pair across slots).
//   - A call that names the bucket of a two-choice pair across slots
//     twice is decided conservatively (its later members see what the
//     hold took), not as the in-memory limiter decides it.
//   - With the servers' clock, a master whose clock steps back after a
//     key expired may let that bucket refill over the step.
//   - A key's expiry is set when it is written, by the limit of that time.
//     SetLimits therefore waits for the calls under way that may still
//     write a key by a limit it changes, then scans every master for that
//     limit's keys and moves their expiries to when each is full under the
//     new limit, never earlier (a function call per slot and batch of
//     keys): it takes as long as the slowest of those calls and the scan.
//     A name SetLimits names that no limit named until then (new, or back
//     after a removal) counts as changed: inline configs may have written
//     its keys meanwhile.
//   - The keys of a limit SetLimits removes, and of the shards beyond a
//     limit's lowered Shards, keep the expiry of the config they were
//     written under, so Redis memory still follows active keys. If the
//     limit comes back after a key expired, that bucket reads full; in
//     memory (and on a file) the bucket would be kept, and read again.
//   - A request that carries an inline Config writes its key with that
//     config's expiry, also on a name a limit names: the bucket is gone
//     once full under it (in memory, too, a sweep drops a bucket full
//     under the config that last wrote it).
//   - Close does not close the client.
package redislimit
