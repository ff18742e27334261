package redislimit

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/seed7fbd42b6/ratelimit/internal/actor"
	"github.com/seed7fbd42b6/ratelimit/internal/bucket"
)

// A job is one Call on its way through the store: its parts, one per slot
// tag it touches, are queued to their tags' batches, and the caller waits
// until every part is done. A call across slots (twophase.go) runs its
// parts in rounds, one or more per round.
type job struct {
	s       *redisStore
	c       *actor.Call
	keys    []string // per item: its bucket's key
	canon   []int32  // per item: the first item of its part naming the same bucket
	present []bool   // per item: whether its prior state was stored (else fresh)
	dms     []dmember
	its     []int32
	ses     []settleEntry
	parts   []part
	pending atomic.Int32
	state   atomic.Int32
	done    chan struct{}
	tp      twoPhase
	async   bool // no caller waits: the last part frees the job (see dropHolds)
}

// Job states: the caller may abandon a queued job; the part that finishes
// it last then releases it.
const (
	jobQueued int32 = iota
	jobDone
	jobAbandoned
)

// part is the share of a job on one tag: one unit, or one per
// member for a job whose members are independent.
type part struct {
	j      *job
	tag    int32
	kind   uint8  // unitDecide, unitPeek, unitReset, unitSettle
	atomic bool   // unitDecide: all members in one unit, granted all or none
	lo, hi int32  // the part's dms (decide), its (peek, reset) or ses (settle)
	hold   string // unitDecide: the hold to set when granted ("": none); unitSettle: the hold to end

	// Results.
	now    int64 // the clock reading the part was decided at
	status uint8 // atomic decide and settle: the unit's status
	err    error
}

// dmember is one member as a part decides it: on items a and b (b < 0:
// one bucket), in a role (a pair of shards across two slots is decided
// by two parts, see twophase.go).
type dmember struct {
	m    int32
	a, b int32
	role uint8
	// rolePair: the other shard's state as the earlier part held it, the
	// time it was read, the value held there, and whether it is the
	// member's First.
	other     bucket.State
	otherAt   int64
	held      float64
	otherIsA  bool
	otherItem int32
}

// settleEntry ends a hold on one bucket: if the bucket still holds
// expect, it is set to target; else amount tokens are credited to it.
type settleEntry struct {
	item             int32
	expect, target   bucket.State
	expectP, targetP bool // present (false: absent, i.e. full)
	amount           float64
}

// Unit kinds and member roles of script.lua.
const (
	unitDecide = 1
	unitPeek   = 2
	unitReset  = 3
	unitSettle = 4

	roleNone = 0
	roleHold = 1 // first shard of a pair across slots: hold what it may take
	rolePair = 2 // second shard: decide the pair
)

var jobPool = sync.Pool{New: func() any { return &job{done: make(chan struct{}, 1)} }}

func (s *redisStore) newJob(c *actor.Call) *job {
	j := jobPool.Get().(*job)
	j.s, j.c = s, c
	n := len(c.Items)
	j.keys = grow(j.keys, n)
	j.canon = grow(j.canon, n)
	j.present = grow(j.present, n)
	for i := range c.Items {
		j.keys[i] = s.ks.bucket(&c.Items[i])
		j.canon[i] = int32(i)
	}
	return j
}

func (j *job) free() {
	clear(j.keys)
	clear(j.dms)
	clear(j.parts)
	clear(j.ses)
	j.dms, j.its, j.ses, j.parts = j.dms[:0], j.its[:0], j.ses[:0], j.parts[:0]
	j.tp.reset()
	j.c, j.s, j.async = nil, nil, false
	jobPool.Put(j)
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// addPart appends a part; its range is set by the caller.
func (j *job) addPart(tag int32, kind uint8) *part {
	j.parts = append(j.parts, part{j: j, tag: tag, kind: kind})
	return &j.parts[len(j.parts)-1]
}

// run submits parts (which must not move until they are done) and waits
// for them. With a ctx that can end, the job may be abandoned: run then
// returns ctx's error and whether a part was already under way (the job,
// and its call, then belong to the store).
func (j *job) run(ctx context.Context, parts []part) (abandoned bool, err error) {
	j.state.Store(jobQueued)
	j.pending.Store(int32(len(parts)))
	stop := ctx.Done()
	j.s.b.submit(parts, stop == nil)
	if stop == nil {
		<-j.done
		return false, nil
	}
	select {
	case <-j.done:
		return false, nil
	case <-stop:
	}
	if j.state.CompareAndSwap(jobQueued, jobAbandoned) {
		return true, ctx.Err()
	}
	<-j.done // finished meanwhile
	return false, nil
}

// partDone finishes one part; the last one wakes the caller, or releases
// an abandoned job.
func (j *job) partDone() {
	if j.pending.Add(-1) != 0 {
		return
	}
	if j.async {
		s := j.s
		j.free()
		s.jobEnded()
		return
	}
	if j.state.Swap(jobDone) == jobAbandoned {
		s := j.s
		j.c.Release()
		j.free()
		s.jobEnded()
		return
	}
	j.done <- struct{}{}
}

// abandoned reports whether the caller gave up on j.
func (j *job) abandoned() bool { return j.state.Load() == jobAbandoned }
