package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed7fbd42b6/ratelimit/internal/actor"
	"github.com/seed7fbd42b6/ratelimit/internal/bucket"
	"github.com/seed7fbd42b6/ratelimit/internal/wal"
)

// Limiter decides rate-limit requests. It is safe for concurrent use by any
// number of goroutines. Create it with Open and release it with Close. A
// zero Limiter is closed: its methods return ErrClosed (Stats a zero
// Stats, Config false).
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
	snapBytes atomic.Int64  // log bytes written when the last snapshot began (minus the tail recovered at Open)
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
	procs := runtime.GOMAXPROCS(0)
	n := opts.Partitions
	if n == 0 {
		n = min(partitionsPerProc*procs, MaxPartitions)
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
	if opts.queueOnly {
		l.group.QueueOnly()
	}
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
	if l.group == nil || !l.closed.CompareAndSwap(false, true) {
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
// not be decided and nothing was taken (but see ErrUnavailable). With
// Options.Path set, a grant is on disk before Limit returns.
//
// If ctx ends while the request waits, Limit returns ctx's error; a request
// a partition had already taken up may still be granted (and committed):
// that can only under-admit.
func (l *Limiter) Limit(ctx context.Context, r Request) (Status, error) {
	return l.decideOne(ctx, r, actor.OpTake)
}

// Check answers as Limit would, without taking anything.
func (l *Limiter) Check(ctx context.Context, r Request) (Status, error) {
	return l.decideOne(ctx, r, actor.OpCheck)
}

func (l *Limiter) decideOne(ctx context.Context, r Request, op actor.Op) (Status, error) {
	if err := l.usable(ctx); err != nil {
		return Status{}, err
	}
	if err := checkKey(r.Key); err != nil {
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
// makes the whole call an error with nothing taken. Requests naming one
// bucket several times are decided in order; if they could never be
// granted together it is ErrInvalidCount, and if they give its limit two
// different configs, ErrInvalidConfig.
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
		err := checkKey(r.Key)
		var d *limitDef
		if err == nil {
			d, err = l.resolve(r.Name, r.Config)
		}
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
	if err := repeatsFit(rs, defs, c.Members); err != nil {
		c.Release()
		return Status{}, err
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

// repeatsFit checks a LimitAll that names one bucket (name and key)
// several times. The requests must agree on its config: two different
// ones for the same buckets in one call are ErrInvalidConfig. And they
// must be able to succeed together, or the call is ErrInvalidCount, not a
// denial whose RetryAfter never comes true. Members are decided in order,
// so for an unsharded bucket this replays them on a full bucket, which is
// the best any time can offer (reserve 1 then take 10 of a 10-token
// bucket never fits; take 10 then reserve 1 does). For a sharded limit,
// whose shards are drawn at random, only the total is checked against
// every shard's worth.
func repeatsFit(rs []Request, defs []*limitDef, ms []actor.Member) error {
	for i := range rs {
		d, first, n := defs[i], true, 0
		for j := range i {
			if defs[j].name == d.name && rs[j].Key == rs[i].Key {
				first = false
				break
			}
		}
		if !first {
			continue
		}
		state := bucket.State{Value: d.perShard.Capacity} // full: the best case
		total, fits, reserve := 0.0, true, false
		for j := i; j < len(rs); j++ {
			if defs[j].name != d.name || rs[j].Key != rs[i].Key {
				continue
			}
			if !d.sameBuckets(defs[j]) {
				return fmt.Errorf("%w: requests %d and %d give limit %q two different configs", ErrInvalidConfig, i, j, d.name)
			}
			n++
			total += ms[j].Count
			reserve = reserve || rs[j].Reserve
			if d.shards == 1 && fits {
				dec := d.perShard.Take(state, 0, ms[j].Count, rs[j].Reserve)
				state, fits = dec.Next, dec.OK
			}
		}
		if n == 1 {
			continue
		}
		most := d.perShard.MaxCount(reserve) * float64(d.shards)
		if !fits || total > most {
			return fmt.Errorf("%w: %v tokens asked of %q/%q in one call, which it can never grant together (at most %v, in this order)",
				ErrInvalidCount, total, d.name, rs[i].Key, most)
		}
	}
	return nil
}

// Reset deletes every shard of (name, key): the bucket is full again. The
// deletion is durable before Reset returns.
//
// Reset, Value and Credit take a limit's name: one of Options.Limits, or
// one that a request carried inline since Open. An inline-only limit is
// unknown to them after a restart until a request carries its config again;
// put limits you reset in Options.Limits.
func (l *Limiter) Reset(ctx context.Context, name, key string) error {
	if err := l.usable(ctx); err != nil {
		return err
	}
	if err := checkKey(key); err != nil {
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
	if err := checkKey(key); err != nil {
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
	ts := int64(math.MinInt64)
	for i := range c.Items {
		s := d.perShard.Project(c.Items[i].State, now)
		v.Value += s.Value
		ts = max(ts, s.TS)
	}
	v.TS = time.Unix(0, ts)
	return v, nil
}

// usable fails fast on a closed (or zero) limiter or an ended context.
func (l *Limiter) usable(ctx context.Context) error {
	if l.closed.Load() || l.group == nil {
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
