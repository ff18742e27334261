package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed7fbd42b6/ratelimit/internal/actor"
	"github.com/seed7fbd42b6/ratelimit/internal/store"
	"github.com/seed7fbd42b6/ratelimit/internal/wal"
)

// Limiter decides rate-limit requests. It is safe for concurrent use by any
// number of goroutines. Create it with Open and release it with Close. A
// zero Limiter is closed: its methods return ErrClosed (Stats a zero
// Stats, Config false).
type Limiter struct {
	opts   Options
	limits atomic.Pointer[map[string]*limitDef]  // the named limits; replaced whole by SetLimits
	recent [recentNames]atomic.Pointer[limitDef] // named limits resolved lately (see resolveIn)
	store  store.Store                           // decides calls: group, or a shared server's store
	group  *actor.Group                          // the in-process partitions; nil on another store
	alone  bool                                  // on group: a lone request may skip the call (Group.DecideAlone)
	wal    *wal.Log                              // nil in memory mode and on another store
	now    func() int64
	logger *slog.Logger

	gate *callGate // the calls under way, on a store that needs SetLimits to wait for them (nil: none)

	inline       sync.Map // inlineKey -> *limitDef
	inlineByName sync.Map // name -> *limitDef, the latest inline config seen

	shardsMu   sync.Mutex
	shardsSeen map[string]int // name -> the most shards its buckets may have (see sawShards); guarded by shardsMu

	closed      atomic.Bool
	stopBG      chan struct{}
	bgDone      sync.WaitGroup
	snapMu      sync.Mutex           // one snapshot at a time
	limitsMu    sync.Mutex           // one SetLimits at a time
	limitsGen   uint64               // SetLimits calls made; guarded by limitsMu
	retired     map[string]*limitDef // on a shared store, the last config of each named limit SetLimits removed; guarded by limitsMu
	unrelimited map[string]bool      // on a shared store, names whose keys a SetLimits failed to relimit; guarded by limitsMu
	unavailable atomic.Uint64        // requests answered with ErrUnavailable
	lastSnap    atomic.Int64         // Unix nanoseconds of the last snapshot (or Open)
	snapBytes   atomic.Int64         // log bytes written when the last snapshot began (minus the tail recovered at Open)
	snapshots   atomic.Uint64        // snapshots written since Open
}

func init() {
	store.OpenLimiter = func(opts any, s store.Store) (any, error) {
		o, ok := opts.(Options)
		if !ok {
			return nil, fmt.Errorf("%w: %T is not ratelimit.Options", ErrInvalidOptions, opts)
		}
		return openOn(o, s)
	}
}

// Open validates opts and starts a limiter: in memory, or, with
// opts.Path, on that file, created if absent, whose state it recovers
// first (recovery reads the snapshot and replays the log). It starts
// goroutines (the partitions' and, with a file, the log's writer and the
// background snapshots) that Close stops. Errors: ErrInvalidOptions or
// ErrInvalidConfig for options or limits it refuses, before touching any
// file; ErrUnavailable when the file cannot be opened, read or created,
// also wrapping ErrLocked (another limiter holds it for longer than
// opts.LockTimeout, for which Open waits), ErrCorrupt (damaged: see
// Salvage) or ErrVersion (a newer format) when one is the reason.
func Open(opts Options) (*Limiter, error) { return openOn(opts, nil) }

// openOn opens a limiter on s, or on its own partitions when s is nil.
func openOn(opts Options, s store.Store) (*Limiter, error) {
	l := &Limiter{opts: opts, stopBG: make(chan struct{})}
	limits, err := newLimitDefs(opts.Limits)
	if err != nil {
		return nil, err
	}
	l.limits.Store(limits)
	l.sawLimits(*limits)
	if opts.Partitions < 0 || opts.Partitions > MaxPartitions {
		return nil, fmt.Errorf("%w: partitions %d not in [0, %d]", ErrInvalidOptions, opts.Partitions, MaxPartitions)
	}
	if s != nil && opts.Path != "" {
		return nil, fmt.Errorf("%w: Path %q is for the embedded file; a limiter on a shared store keeps no file", ErrInvalidOptions, opts.Path)
	}
	if clock := opts.Now; clock != nil {
		l.now = func() int64 { return unixNano(clock()) }
	} else {
		l.now = newWallClock().now
	}
	l.logger = opts.Logger
	if l.logger == nil {
		l.logger = slog.New(slog.DiscardHandler)
	}
	if s != nil {
		l.store = s
		if _, ok := s.(store.Relimiter); ok {
			l.gate = new(callGate)
		}
		return l, nil
	}
	maxBuckets := max(orDefault(opts.MaxBuckets, DefaultMaxBuckets), 0)
	if maxBuckets > 0 && opts.Partitions > maxBuckets {
		return nil, fmt.Errorf("%w: Partitions %d above MaxBuckets %d: each partition holds its share of MaxBuckets, and some would hold none",
			ErrInvalidOptions, opts.Partitions, maxBuckets)
	}
	var log actor.Log = actor.NopLog{}
	if opts.Path != "" {
		w, err := l.openLog()
		if err != nil {
			return nil, err
		}
		l.wal, log = w, w
	}
	n := opts.Partitions
	if n == 0 {
		per := memoryPartitionsPerProc
		if l.wal != nil {
			per = partitionsPerProc
		}
		n = min(per*runtime.GOMAXPROCS(0), MaxPartitions)
		if maxBuckets > 0 {
			n = min(n, maxBuckets)
		}
	}
	l.group = actor.NewGroup(n, log, l.now)
	l.group.SetMaxBuckets(maxBuckets)
	l.store = l.group
	if opts.queueOnly {
		l.group.QueueOnly()
	}
	l.alone = !opts.queueOnly
	if l.wal != nil {
		if err := l.recover(); err != nil {
			l.wal.Close()
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
	if l.store == nil || !l.closed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	if l.group == nil {
		if err := l.store.Close(); err != nil {
			return fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		return nil
	}
	close(l.stopBG)
	l.bgDone.Wait()
	l.group.Stop()
	l.snapMu.Lock() // a snapshot the user started finishes before the file closes
	defer l.snapMu.Unlock()
	if l.wal != nil {
		if err := l.wal.Close(); err != nil {
			return fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
	}
	return nil
}

// usable fails fast on a closed (or zero) limiter or an ended context.
func (l *Limiter) usable(ctx context.Context) error {
	if l.closed.Load() || l.store == nil {
		return ErrClosed
	}
	return ctx.Err()
}

// itemErr maps a store's error to this package's sentinels.
func (l *Limiter) itemErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, actor.ErrClosed):
		return ErrClosed
	case errors.Is(err, actor.ErrFull):
		return ErrTooManyKeys
	case errors.Is(err, ErrInvalidConfig), errors.Is(err, ErrTooLarge):
		return err // a shared store rejects, at use, a limit it cannot represent or a call it cannot take
	}
	l.unavailable.Add(1)
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}
