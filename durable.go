package ratelimit

import (
	"errors"
	"fmt"
	"time"

	"github.com/seed7fbd42b6/ratelimit/internal/actor"
	"github.com/seed7fbd42b6/ratelimit/internal/bucket"
	"github.com/seed7fbd42b6/ratelimit/internal/snapshot"
	"github.com/seed7fbd42b6/ratelimit/internal/wal"
	bolt "go.etcd.io/bbolt"
)

// The root package's bounds and defaults are the log's.
const (
	_ = uint64(MaxKeyLen-wal.MaxFieldLen) + uint64(wal.MaxFieldLen-MaxKeyLen)
	_ = uint64(DefaultLogPreallocate-wal.DefaultPreallocate) + uint64(wal.DefaultPreallocate-DefaultLogPreallocate)
	_ = uint64(MaxLogPreallocate-wal.MaxPreallocate) + uint64(wal.MaxPreallocate-MaxLogPreallocate)
)

func (l *Limiter) openLog() (*wal.Log, error) {
	timeout := l.opts.LockTimeout
	if timeout == 0 {
		timeout = DefaultLockTimeout
	}
	w, err := wal.Open(l.opts.Path, wal.Options{
		LockTimeout:    timeout,
		Logger:         l.logger,
		BeforeCommit:   l.opts.beforeCommit,
		NoFreelistSync: true,
		Preallocate:    l.opts.LogPreallocate,
	})
	if errors.Is(err, wal.ErrInvalidOptions) { // a bad option, or a Path that is not a regular file: nothing written
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, &fileError{err})
	}
	return w, nil
}

// recover loads the latest snapshot and replays the log after it.
func (l *Limiter) recover() error {
	var n int
	shards := map[string]int{} // the most shards each name's buckets have
	apply := func(r wal.Record) error {
		n++
		if !r.Delete && int(r.Shard) >= shards[r.Name] {
			shards[r.Name] = int(r.Shard) + 1
		}
		var lim *bucket.Limit
		if d, ok := l.named(r.Name); ok && int(r.Shard) < d.shards {
			lim = &d.perShard
		}
		l.group.Restore(actor.BucketID{Name: r.Name, Key: r.Key, Shard: r.Shard},
			bucket.State{Value: r.Value, TS: r.TS}, lim, r.Delete)
		return nil
	}
	start := time.Now()
	pos, err := snapshot.Load(l.wal.DB(), apply)
	if err != nil {
		return fmt.Errorf("%w: loading snapshot: %w", ErrUnavailable, &fileError{err})
	}
	fromSnap := n
	if err := l.wal.Continues(pos); err != nil {
		return fmt.Errorf("%w: replaying log: %w", ErrUnavailable, &fileError{err})
	}
	if err := l.wal.Replay(pos, apply); err != nil {
		return fmt.Errorf("%w: replaying log: %w", ErrUnavailable, &fileError{err})
	}
	for name, n := range shards {
		l.sawShards(name, n)
	}
	// The recovered tail counts toward the next snapshot's triggers as if
	// this process had written it: it is log no snapshot covers yet.
	l.snapBytes.Store(-l.wal.Replayed())
	l.logger.Info("ratelimit: recovered", "path", l.opts.Path, "snapshot_pos", pos,
		"snapshot_records", fromSnap, "log_records", n-fromSnap, "took", time.Since(start))
	return nil
}

// Snapshot writes the current state of every bucket that is not full to the
// file and drops the log it covers. It runs by itself per
// Options.SnapshotBytes and SnapshotInterval; calling it directly is useful
// before a planned restart. In memory mode it only drops full buckets.
// After the log has failed it writes nothing and returns ErrUnavailable:
// the partitions may hold changes whose callers were told they failed.
func (l *Limiter) Snapshot() error {
	l.snapMu.Lock()
	defer l.snapMu.Unlock()
	if l.closed.Load() || l.store == nil {
		return ErrClosed
	}
	if l.group == nil {
		return nil // a shared store keeps its own state
	}
	if l.wal == nil {
		l.sweep()
		return nil
	}
	if err := l.wal.Err(); err != nil {
		return fmt.Errorf("%w: snapshot: the log failed: %w", ErrUnavailable, err)
	}
	// The fuzzy-snapshot rule: note the log position first, then copy the
	// partitions one by one. Records after pos are replayed over the copy.
	// The copy may hold changes whose records were not committed yet (Run
	// has appended them); the barrier below waits for them, and if any
	// failed, the copy is not written: it would make durable a credit or
	// reset whose caller was told it failed.
	pos, written := l.wal.Position(), l.wal.Written()
	parts := make([][]wal.Record, l.group.Partitions())
	now := l.now()
	for i := range parts {
		if !l.group.Run(i, func(p *actor.Partition) {
			recs := make([]wal.Record, 0, p.Len())
			p.Sweep(now, func(id actor.BucketID, s bucket.State) {
				recs = append(recs, wal.Record{Name: id.Name, Key: id.Key, Shard: id.Shard, Value: s.Value, TS: s.TS})
			})
			parts[i] = recs
		}) {
			return ErrClosed
		}
	}
	if err := l.logBarrier(); err != nil {
		return fmt.Errorf("%w: snapshot: the log failed: %w", ErrUnavailable, err)
	}
	err := snapshot.Write(l.wal.DB(), pos, func(emit func(wal.Record) error) error {
		for _, recs := range parts {
			for _, r := range recs {
				if err := emit(r); err != nil {
					return err
				}
			}
		}
		return nil
	}, func(tx *bolt.Tx) error { return l.wal.TruncateTx(tx, pos) })
	if err != nil {
		l.logger.Error("ratelimit: snapshot failed", "err", err)
		return fmt.Errorf("%w: snapshot: %w", ErrUnavailable, err)
	}
	l.lastSnap.Store(time.Now().UnixNano())
	l.snapBytes.Store(written)
	l.snapshots.Add(1)
	l.logger.Debug("ratelimit: snapshot written", "pos", pos, "partitions", len(parts))
	return nil
}

// barrier is a wal.Waiter that reports on a channel.
type barrier chan error

func (b barrier) Committed(err error) { b <- err }

// logBarrier waits until every record appended to the log so far is
// durable, and returns the log's sticky error if one failed.
func (l *Limiter) logBarrier() error {
	b := make(barrier, 1)
	l.wal.Append(nil, b)
	return <-b
}
