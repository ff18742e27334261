package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed7fbd42b6/ratelimit/actor"
	"github.com/seed7fbd42b6/ratelimit/bucket"
	"github.com/seed7fbd42b6/ratelimit/wal"
)

// Limiter decides rate-limit requests. It is safe for concurrent use by any
// number of goroutines. Create it with Open and release it with Close.
type Limiter struct {
	opts   Options
	limits map[string]*limitDef
	group  *actor.Group
	log    *wal.Log // nil in memory mode
	now    func() int64
	logger *slog.Logger

	inline       sync.Map // inlineKey -> *limitDef
	inlineByName sync.Map // name -> *limitDef, the latest inline config seen

	closed    atomic.Bool
	stopBG    chan struct{}
	bgDone    sync.WaitGroup
	snapMu    sync.Mutex    // one snapshot at a time
	errors    atomic.Uint64 // requests answered with ErrUnavailable
	lastSnap  atomic.Int64  // Unix nanoseconds of the last snapshot (or Open)
	snapBytes atomic.Int64  // log bytes written when the last snapshot began
	snapshots atomic.Uint64 // snapshots written since Open
}

// Open validates opts, recovers durable state if opts.Path is set, and
// starts the limiter.
func Open(opts Options) (*Limiter, error) {
	l := &Limiter{opts: opts, limits: make(map[string]*limitDef, len(opts.Limits)), stopBG: make(chan struct{})}
	for name, c := range opts.Limits {
		d, err := newLimitDef(name, c)
		if err != nil {
			return nil, err
		}
		l.limits[name] = d
	}
	if opts.Partitions < 0 || opts.Partitions > MaxPartitions {
		return nil, fmt.Errorf("%w: partitions %d not in [0, %d]", ErrInvalidOptions, opts.Partitions, MaxPartitions)
	}
	n := opts.Partitions
	if n == 0 {
		n = runtime.GOMAXPROCS(0)
	}
	clock := opts.Now
	if clock == nil {
		clock = time.Now
	}
	l.now = func() int64 { return clock().UnixNano() }
	l.logger = opts.Logger
	if l.logger == nil {
		l.logger = slog.New(slog.DiscardHandler)
	}
	var log actor.Log = actor.NopLog{}
	if opts.Path != "" {
		w, err := l.openLog()
		if err != nil {
			return nil, err
		}
		l.log, log = w, w
	}
	l.group = actor.NewGroup(n, log, l.now)
	if l.log != nil {
		if err := l.recover(); err != nil {
			l.log.Close()
			return nil, err
		}
	}
	l.group.Start()
	l.lastSnap.Store(time.Now().UnixNano())
	l.startBackground()
	return l, nil
}

// Close stops the limiter: requests in flight finish, durable state is
// flushed and the file closed. The first call returns the result of
// flushing; later calls return ErrClosed.
func (l *Limiter) Close() error {
	if !l.closed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	close(l.stopBG)
	l.bgDone.Wait()
	l.group.Stop()
	l.snapMu.Lock() // a snapshot the user started finishes before the file closes
	defer l.snapMu.Unlock()
	if l.log != nil {
		if err := l.log.Close(); err != nil {
			return fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
	}
	return nil
}

// Limit asks for r.Count tokens and, if they are granted, takes them. A
// denial is OK == false with a nil error; an error means the request could
// not be decided and nothing was taken. With Options.Path set, a grant is
// on disk before Limit returns.
//
// If ctx ends while the request waits, Limit returns ctx's error; a request
// a partition had already taken up may still be granted (and committed):
// that can only under-admit.
func (l *Limiter) Limit(ctx context.Context, r Request) (Status, error) {
	return l.one(ctx, r, actor.OpTake)
}

// Check answers as Limit would, without taking anything.
func (l *Limiter) Check(ctx context.Context, r Request) (Status, error) {
	return l.one(ctx, r, actor.OpCheck)
}

func (l *Limiter) one(ctx context.Context, r Request, op actor.Op) (Status, error) {
	if err := l.usable(ctx); err != nil {
		return Status{}, err
	}
	d, err := l.resolve(r.Name, r.Config)
	if err != nil {
		return Status{}, err
	}
	n, err := d.count(r.Count, r.Reserve)
	if err != nil {
		return Status{}, err
	}
	c := actor.NewCall()
	c.Atomic = true // a sharded request's two shards are one decision
	l.addMember(c, d, r.Key, op, n, r.Reserve)
	if abandoned, err := l.group.Decide(ctx, c); err != nil {
		if !abandoned {
			c.Release()
		}
		return Status{}, err
	}
	defer c.Release()
	if err := l.itemErr(c.ItemErr(0)); err != nil {
		return Status{}, err
	}
	return d.status(&c.Members[0]), nil
}

// LimitAll asks every request at once: all are granted or none is, never
// over any limit, and concurrent calls cannot deadlock. RetryAfter is the
// latest of the members' (of the denying ones, for a denial). A bad member
// makes the whole call an error with nothing taken.
func (l *Limiter) LimitAll(ctx context.Context, rs ...Request) (Status, error) {
	if err := l.usable(ctx); err != nil {
		return Status{}, err
	}
	if len(rs) == 0 {
		return Status{OK: true}, nil
	}
	c := actor.NewCall()
	c.Atomic = true
	defs := make([]*limitDef, len(rs))
	for i, r := range rs {
		d, err := l.resolve(r.Name, r.Config)
		if err == nil {
			var n float64
			if n, err = d.count(r.Count, r.Reserve); err == nil {
				defs[i] = d
				l.addMember(c, d, r.Key, actor.OpTake, n, r.Reserve)
				continue
			}
		}
		c.Release()
		return Status{}, fmt.Errorf("request %d: %w", i, err)
	}
	if abandoned, err := l.group.Decide(ctx, c); err != nil {
		if !abandoned {
			c.Release()
		}
		return Status{}, err
	}
	defer c.Release()
	if err := l.itemErr(c.FirstErr()); err != nil {
		return Status{}, err
	}
	granted := true
	for i := range c.Members {
		granted = granted && c.Members[i].OK
	}
	// RetryAfter is the latest wait (of the denying members, for a
	// denial). Limit names the member that binds: for a denial the denying
	// one with that wait, for a grant the one with the fewest tokens left,
	// which also gives Remaining and ResetAfter.
	// A denial is reported as the denying member with the latest wait
	// (its Remaining is what it holds: nothing was written). A grant is
	// reported as the member left with the fewest tokens, with the latest
	// wait of all members.
	var st Status
	for i := range c.Members {
		ms := defs[i].status(&c.Members[i])
		switch {
		case granted:
			wait := max(st.RetryAfter, ms.RetryAfter)
			if st.Limit == "" || ms.Remaining < st.Remaining {
				st = ms
			}
			st.RetryAfter = wait
		case !ms.OK && (st.Limit == "" || ms.RetryAfter > st.RetryAfter):
			st = ms
		}
	}
	st.OK = granted
	return st, nil
}

// LimitMany decides each request independently, as Limit would, but hands
// them to the partitions together: for callers that decide many things at
// once (a game tick, a queue consumer) it costs far less per request. It
// appends one Decision per request to out[:0] and returns it; reuse out to
// avoid allocating.
func (l *Limiter) LimitMany(ctx context.Context, rs []Request, out []Decision) []Decision {
	out = out[:0]
	if err := l.usable(ctx); err != nil {
		for range rs {
			out = append(out, Decision{Err: err})
		}
		return out
	}
	c := actor.NewCall()
	sc := manyPool.Get().(*manyScratch)
	defer manyPool.Put(sc)
	sc.reset(l.group.N())
	sharded := false
	var d *limitDef // the previous request's limit: batches mostly repeat one
	for i := range rs {
		r := &rs[i]
		var err error
		if d == nil || r.Config != nil || r.Name != d.name || d.inline {
			d, err = l.resolve(r.Name, r.Config)
		}
		var n float64
		if err == nil {
			n, err = d.count(r.Count, r.Reserve)
		}
		switch {
		case err != nil:
			out = append(out, Decision{Err: err})
			d = nil
		case d.shards > 1: // spans two partitions: decided one by one below
			out = append(out, Decision{Status: Status{Limit: d.name}, Err: errLater})
			sharded = true
		default:
			out = append(out, Decision{Status: Status{Limit: d.name}})
			h := bucket.HashWith(d.nameHash, r.Key)
			part := l.group.Route(h, 0)
			sc.add(h, part, int32(i))
			c.Members = append(c.Members, actor.Member{Op: actor.OpTake, Count: n, Reserve: r.Reserve, B: -1, Ref: d})
		}
	}
	// Place the items grouped by partition, in request order within each.
	sc.prefix()
	c.SetItems(len(c.Members))
	for m := range c.Members {
		d := c.Members[m].Ref.(*limitDef)
		h, part := sc.hash[m], sc.part[m]
		pos := sc.next[part]
		sc.next[part]++
		c.SetItem(pos, actor.Item{
			ID:    actor.BucketID{Name: d.name, Key: rs[sc.req[m]].Key},
			Hash:  actor.BucketHash(h, 0),
			Lim:   &d.shard,
			Phase: d.phaseFor(h),
			Part:  part,
		}, int32(m))
		c.Members[m].A = pos
	}
	if len(c.Members) > 0 {
		abandoned, err := l.group.Decide(ctx, c)
		if err != nil {
			for i := range out {
				if out[i].Err == nil || out[i].Err == errLater {
					out[i].Err = err
				}
			}
			if !abandoned {
				c.Release()
			}
			return out
		}
	}
	m := 0
	for i := range out {
		if out[i].Err != nil {
			continue
		}
		if err := l.itemErr(c.ItemErr(m)); err != nil {
			out[i].Err = err
		} else {
			out[i].Status = c.Members[m].Ref.(*limitDef).status(&c.Members[m])
		}
		m++
	}
	c.Release()
	if sharded {
		for i := range out {
			if out[i].Err == errLater {
				out[i].Status, out[i].Err = l.Limit(ctx, rs[i])
			}
		}
	}
	return out
}

// manyScratch is LimitMany's per-call working memory, pooled.
type manyScratch struct {
	hash []uint64
	part []int32
	req  []int32 // request index of each member
	next []int32 // per partition: the next free item index
}

var manyPool = sync.Pool{New: func() any { return new(manyScratch) }}

func (s *manyScratch) reset(parts int) {
	s.hash, s.part, s.req = s.hash[:0], s.part[:0], s.req[:0]
	s.next = slices.Grow(s.next[:0], parts)[:parts]
	clear(s.next)
}

// add records a member's hash and partition, counting it in next.
func (s *manyScratch) add(h uint64, part, req int32) {
	s.hash = append(s.hash, h)
	s.part = append(s.part, part)
	s.req = append(s.req, req)
	s.next[part]++
}

// prefix turns next's per-partition counts into each partition's first
// item index.
func (s *manyScratch) prefix() {
	var sum int32
	for p, n := range s.next {
		s.next[p] = sum
		sum += n
	}
}

// errLater marks, inside LimitMany, a request decided after the batch.
var errLater = errors.New("decided later")

// Reset deletes every shard of (name, key): the bucket is full again. The
// deletion is durable before Reset returns.
func (l *Limiter) Reset(ctx context.Context, name, key string) error {
	if err := l.usable(ctx); err != nil {
		return err
	}
	d, err := l.resolve(name, nil)
	if err != nil {
		return err
	}
	c := actor.NewCall()
	defer c.Release()
	l.addShards(c, d, key)
	l.group.Reset(c)
	return l.itemErr(c.FirstErr())
}

// Value returns the state of (name, key) projected to now, summed over the
// limit's shards, and the limit's config. It writes nothing.
func (l *Limiter) Value(ctx context.Context, name, key string) (Value, error) {
	if err := l.usable(ctx); err != nil {
		return Value{}, err
	}
	d, err := l.resolve(name, nil)
	if err != nil {
		return Value{}, err
	}
	c := actor.NewCall()
	defer c.Release()
	l.addShards(c, d, key)
	l.group.Peek(c)
	if err := l.itemErr(c.FirstErr()); err != nil {
		return Value{}, err
	}
	now := l.now()
	v := Value{Config: d.cfg}
	var ts int64
	for i := range c.Items {
		s := d.shard.Project(c.Items[i].State, now)
		v.Value += s.Value
		ts = max(ts, s.TS)
	}
	v.TS = time.Unix(0, ts)
	return v, nil
}

// usable fails fast on a closed limiter or an ended context.
func (l *Limiter) usable(ctx context.Context) error {
	if l.closed.Load() {
		return ErrClosed
	}
	return ctx.Err()
}

// itemErr maps a partition's error to this package's sentinels.
func (l *Limiter) itemErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, actor.ErrClosed):
		return ErrClosed
	}
	l.errors.Add(1)
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}
