// Package actor runs the limiter's buckets on partitions: each partition
// owns a table of bucket states outright, and at any moment exactly one
// goroutine executes for it (see "Who executes a partition"), so deciding
// never locks a bucket. A bucket (name, key, shard) lives on partition
// (Hash(name, key) + shard/2) mod N: shards 2k and 2k+1 pair up on one
// partition, where a request's two choices are decided in one step, and a
// hot limit's pairs spread over up to N partitions, so concurrent callers
// rarely meet on one (see Group.Route).
//
// # Calls and messages
//
// A Call is one caller's request: Items are the buckets it touches, Members
// the decisions it asks for (one or two items each: two for a sharded limit's
// power of two choices). The caller sends the call to the partitions that
// own its items as messages and waits on the call's done channel, once per
// phase; a partition drains every message queued since it last woke, reads
// the clock once for the whole batch, and decides each message with the pure
// arithmetic of package bucket. (An independent call over several
// partitions, LimitMany, reads the clock once for all the spans its caller
// runs itself, below, unless a partition has used a later reading since:
// a partition's readings never go backwards. A clock read costs about as
// much as a decision here.)
//
// In memory mode (NopLog) a partition builds no log records and finishes a
// writing message as soon as its batch is done, instead of through a
// batch waiter: the same acknowledgement point, minus the bookkeeping.
//
// # Who executes a partition
//
// A partition has a goroutine and an executor token (Partition.busy, under
// its inbox mutex); only the token's holder touches the partition's state.
// A sender whose message finds the partition idle (no holder, nothing
// queued) takes the token and runs the message on its own goroutine, then,
// if messages queued meanwhile, runs them too (one more batch) and gives
// the token back, waking the partition's goroutine for whatever is still
// queued. Otherwise the message is queued (a caller then parks) and the
// holder or the partition's goroutine runs it. This is flat combining: an
// uncontended decision costs no goroutine switch at all, contended ones
// batch as before, and a two-phase chain over idle partitions runs from
// end to end on the caller's goroutine (a step passes the call on by
// running the next step inline, holding both tokens). Order is kept (a
// message runs inline only when nothing is queued before it), and the
// protocol below is the same whoever executes. Tokens are only ever taken
// when free, never waited for, so holding several cannot deadlock. With
// callers doing the work, idle partitions cost nothing, so the limiter
// makes more of them than processors: two callers then rarely meet on one
// partition, where one of them would park.
//
// An idle partition is simpler still: a lone request on one bucket is
// decided by its caller under the partition's mutex, as a striped lock
// would decide it, with no Call at all (Group.DecideAlone); with a log,
// the bucket's record goes to the log under the mutex and the caller
// waits for its commit alone. In memory mode a call over several idle
// partitions is decided under their mutexes too (locked.go). The
// mutex is held for the decision alone: the clock is read before it is
// taken, and the request's wait, tokens left and time until full are
// worked out after it is released, from the states the decision saw.
// A bucket at its limit is read far more often than it changes: once it
// has denied the same request a few times running, its state is published
// (denial.go, a sequence lock of atomic words), and that request is then
// denied from the published state without the mutex, until anything
// writes the bucket or an executor runs the partition.
//
// # The bucket table
//
// A partition's buckets are in its own hash table (table.go), not a Go map:
// an entry is one cache line, keyed by the bucket's seeded 64-bit hash
// (bucket.TableHash: keys cannot be chosen to collide) and verified against the
// full id; growth splits one subtable of at most 4096 slots at a time.
// While deciding a batch, a partition touches the table lines of the
// next 32 items ahead (prefetch.go), so that with millions of buckets the
// cache misses of a batch overlap instead of queueing one after another.
// Caller and partition exchange a pooled Call whose first member and items
// share its allocation. An idle partition goroutine yields once before
// sleeping (so released callers can queue their next requests into one
// batch), or up to 64 times after a LimitMany-sized message.
//
// # The one acknowledgement point
//
// A grant is applied to the partition's map at once (so the next decision
// sees it) and becomes a record of the bucket's absolute state (one per
// bucket per batch: a later write in the batch replaces it). At the end of
// the batch the partition hands all its records, with the messages that
// wrote them, to the Log; the Log calls back once they are durable, and only
// then are those messages finished and their callers released. In memory
// mode no records are built and a batch's writing messages finish at the
// same point, without a Log (see below).
// Messages that wrote nothing (denials, checks, reads) finish immediately;
// they may rest on grants not yet durable, which can only under-admit.
//
// # Several buckets atomically
//
// A call whose items all live on one partition is decided there in one
// step. Otherwise it is chained through its partitions in partition order:
// each holds the call's buckets and passes the call to the next; the last
// one has every state, decides, stores its part and sends commit (store the
// new states, release) or abort (release) back to the others. A held bucket
// is changed by no one else: messages that touch it are parked, not blocked
// on, and rerun in arrival order when it is released (newcomers queue
// behind them). A partition holds all or none of a step's buckets, and a
// call waits only on partitions after the ones it holds, so waits form no
// cycle: no deadlock. Holds last one hop between partitions, never a trip
// through the caller's goroutine. A single request on two shards that live
// on different partitions first tries a hold-free path (see twochoice.go).
//
// # Cancellation
//
// A single-message call whose caller gives up before a partition has taken
// it up is skipped: nothing is consumed. One already taken up may still be
// granted (and, durably, committed) after its caller has been told the
// context ended; that is conservative. Calls over several partitions
// observe cancellation only before they start: once under way they finish,
// and cannot block forever, since no partition ever blocks on a caller and
// holds end one hop later.
package actor
