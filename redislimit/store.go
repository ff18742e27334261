package redislimit

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed7fbd42b6/ratelimit/internal/actor"
)

// redisStore keeps a limiter's buckets on a Redis server or cluster; it
// implements internal/store.Store. Its methods are safe for concurrent
// use.
type redisStore struct {
	client  redis.UniversalClient
	ks      *keyspace
	clock   func() int64 // nil: the server's TIME
	holdTTL time.Duration
	sweep   int // expiry-index entries a call deletes at most (client clock)
	b       batcher

	grants, denials, reservations atomic.Uint64

	mu     sync.Mutex
	active int // jobs under way
	closed bool
	idle   sync.Cond
}

func newStore(client redis.UniversalClient, cfg *config, clock func() int64) *redisStore {
	s := &redisStore{
		client:  client,
		ks:      newKeyspace(cfg.prefix),
		clock:   clock,
		holdTTL: cfg.holdTTL,
		sweep:   cfg.sweep,
	}
	s.idle.L = &s.mu
	_, single := client.(*redis.Client) // keys of any slots may share a call
	s.b.start(s, cfg.rounds, single && !cfg.noMerge)
	return s
}

// Partitions is the number of slot tags.
func (s *redisStore) Partitions() int { return Slots }

// Route returns the tag of shard shard of the bucket whose (name, key)
// hashes to hash.
func (s *redisStore) Route(hash uint64, shard uint32) int32 { return route(hash, shard) }

// begin registers a job; false once the store is closed.
func (s *redisStore) begin() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.beginLocked()
}

// beginLocked is begin with s.mu held.
func (s *redisStore) beginLocked() bool {
	if s.closed {
		return false
	}
	s.active++
	return true
}

func (s *redisStore) jobEnded() {
	s.mu.Lock()
	s.active--
	if s.active == 0 {
		s.idle.Broadcast()
	}
	s.mu.Unlock()
}

// Close waits for the calls under way, then stops; calls made afterwards
// fail with actor.ErrClosed. It does not close the client.
func (s *redisStore) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.b.flush() // the background drops of holds waiting for a round
	for s.active > 0 {
		s.idle.Wait()
	}
	s.mu.Unlock()
	s.b.close()
	return nil
}

// Counts returns the decisions made through this store. Live is not
// tracked: the buckets live on the server.
func (s *redisStore) Counts() actor.Counts {
	return actor.Counts{Grants: s.grants.Load(), Denials: s.denials.Load(), Reservations: s.reservations.Load()}
}

func failItems(c *actor.Call, err error) {
	for i := range c.Items {
		c.Items[i].Err = err
	}
}

// Decide decides c's members; see internal/store.Store.
func (s *redisStore) Decide(ctx context.Context, c *actor.Call) (abandoned bool, err error) {
	if len(c.Items) == 0 {
		return false, nil
	}
	if !s.begin() {
		failItems(c, actor.ErrClosed)
		return false, nil
	}
	bad := false
	for i := range c.Items {
		if err := checkLimit(c.Items[i].ID.Name, c.Items[i].Lim); err != nil {
			c.Items[i].Err, bad = err, true
		}
	}
	if bad && c.Atomic {
		failItems(c, c.FirstErr())
		s.jobEnded()
		return false, nil
	}
	if c.Atomic && len(c.Items) > maxAtomicItems && !fitsTags(c) {
		failItems(c, errTooBig)
		s.jobEnded()
		return false, nil
	}
	j := s.newJob(c)
	switch {
	case !c.Atomic:
		if j.planIndependent() == 0 {
			return s.end(j, false, nil)
		}
	case onePart(c):
		j.planAtomic()
	case !writes(c):
		j.planPeek(true)
		abandoned, err = j.run(ctx, j.parts)
		if err == nil {
			j.decideRead()
		}
		return s.end(j, abandoned, err)
	default:
		if err := ctx.Err(); err != nil {
			j.free()
			s.jobEnded()
			return false, err
		}
		j.twoPhase()
		return s.end(j, false, nil)
	}
	abandoned, err = j.run(ctx, j.parts)
	return s.end(j, abandoned, err)
}

// end finishes a job the caller ran: unless abandoned (the store then
// releases it when its last part is done), it is freed here.
func (s *redisStore) end(j *job, abandoned bool, err error) (bool, error) {
	if abandoned {
		return true, err
	}
	j.free()
	s.jobEnded()
	return false, err
}

// Peek fills c's items' states as stored (or fresh) and sets c.Now to the
// latest clock reading among the programs that read them.
func (s *redisStore) Peek(c *actor.Call) {
	s.runItems(c, func(j *job) { j.planPeek(false) }, func(j *job) {
		for i := range j.parts {
			c.Now = max(c.Now, j.parts[i].now)
		}
	})
}

// Reset deletes c's items' buckets.
func (s *redisStore) Reset(c *actor.Call) {
	s.runItems(c, func(j *job) { j.planItems(unitReset) }, nil)
}

// runItems runs one job over c's items, planned by plan; after, if not
// nil, reads the job's parts before it ends.
func (s *redisStore) runItems(c *actor.Call, plan, after func(*job)) {
	if len(c.Items) == 0 {
		return
	}
	if !s.begin() {
		failItems(c, actor.ErrClosed)
		return
	}
	j := s.newJob(c)
	plan(j)
	j.run(context.Background(), j.parts)
	if after != nil {
		after(j)
	}
	s.end(j, false, nil)
}

// fitsTags reports whether no tag has more than maxAtomicItems of c's
// items.
func fitsTags(c *actor.Call) bool {
	var n [Slots]int
	for i := range c.Items {
		if n[c.Items[i].Part]++; n[c.Items[i].Part] > maxAtomicItems {
			return false
		}
	}
	return true
}

// onePart reports whether all of c's items share a tag.
func onePart(c *actor.Call) bool {
	t := c.Items[0].Part
	for i := 1; i < len(c.Items); i++ {
		if c.Items[i].Part != t {
			return false
		}
	}
	return true
}

// writes reports whether deciding c may store anything.
func writes(c *actor.Call) bool {
	for i := range c.Members {
		if c.Members[i].Op != actor.OpCheck {
			return true
		}
	}
	return false
}
