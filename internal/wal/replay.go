package wal

import (
	"encoding/binary"
	"fmt"
	"math"
	"runtime/debug"

	bolt "go.etcd.io/bbolt"
)

// Replay calls fn with every record of every committed batch whose sequence
// number is greater than after, in log order. It is meant for recovery,
// before the first Append. A batch that fails validation, or a gap in the
// sequence, stops Replay with an error wrapping ErrCorrupt that names the
// sequence number; fn has then seen every record of every earlier batch and
// none of the bad one. An error from fn stops Replay and is returned as is.
// Replayed then counts the bytes of the batches it decoded.
func (l *Log) Replay(after uint64, fn func(Record) error) (err error) {
	if after == math.MaxUint64 {
		return nil
	}
	inFn := false
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer recoverCorrupt(&err, "replay", &inFn)
	return l.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(logBucket).Cursor()
		var start [8]byte
		binary.BigEndian.PutUint64(start[:], after+1)
		var (
			a    assembler
			prev uint64
		)
		// emit decodes the assembled batch and hands its records to fn.
		emit := func() error {
			seq, batch := a.take()
			if prev != 0 && seq != prev+1 {
				return fmt.Errorf("%w: log batch %d follows %d", ErrCorrupt, seq, prev)
			}
			prev = seq
			l.replayed.Add(int64(len(batch)))
			fnErr := error(nil)
			err := DecodeBatch(batch, func(r Record) error {
				inFn = true
				fnErr = fn(r)
				inFn = false
				return fnErr
			})
			if fnErr != nil {
				return fnErr
			}
			if err != nil {
				return fmt.Errorf("wal: log batch %d: %w", seq, err)
			}
			return nil
		}
		for k, v := c.Seek(start[:]); k != nil; k, v = c.Next() {
			seq, chunk, err := parseLogKey(k)
			// k ends the open batch unless it continues it; a
			// malformed key carrying the batch's sequence number is
			// that batch's fault.
			ends := chunk == 0 || seq != a.seq
			if err != nil {
				ends = len(k) < seqKeyLen || binary.BigEndian.Uint64(k) != a.seq
			}
			if a.open() && ends {
				if err := emit(); err != nil {
					return err
				}
			}
			if err != nil {
				return err
			}
			if err := a.add(seq, chunk, v); err != nil {
				return err
			}
		}
		if a.open() {
			return emit()
		}
		return nil
	})
}

// Continues checks that the log holds every batch after pos, the
// position of the snapshot recovery starts from: nothing after pos was
// truncated, pos is not beyond Position, and the first batch after pos,
// if any, is pos+1. Otherwise the snapshot or the log's start is damaged
// (say, the snapshot's bucket is missing, so pos reads 0) and replaying
// would silently forget batches: an error wrapping ErrCorrupt.
func (l *Log) Continues(pos uint64) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	inFn := false
	defer recoverCorrupt(&err, "check", &inFn)
	if last := l.Position(); pos > last {
		return fmt.Errorf("%w: the snapshot is at log position %d, beyond the log's %d", ErrCorrupt, pos, last)
	}
	return l.db.View(func(tx *bolt.Tx) error {
		meta, lb := tx.Bucket(metaBucket), tx.Bucket(logBucket)
		if meta == nil || lb == nil {
			return fmt.Errorf("%w: meta or log bucket missing", ErrCorrupt)
		}
		if t := meta.Get(truncatedKey); len(t) == 8 {
			if err := CheckSnapshotPos(pos, binary.BigEndian.Uint64(t)); err != nil {
				return err
			}
		}
		var start [8]byte
		binary.BigEndian.PutUint64(start[:], pos+1)
		if k, _ := lb.Cursor().Seek(start[:]); k != nil {
			seq, _, err := parseLogKey(k)
			if err != nil {
				return err
			}
			if seq != pos+1 {
				return fmt.Errorf("%w: the log resumes at batch %d after the snapshot's position %d", ErrCorrupt, seq, pos)
			}
		}
		return nil
	})
}

// TruncateTx deletes every log batch with sequence number <= upTo inside
// tx, a writable transaction on DB(), and records upTo so that Position
// (and the next sequence number) never goes back, even after reopening an
// emptied log. upTo beyond Position is refused with ErrPosition.
func (l *Log) TruncateTx(tx *bolt.Tx, upTo uint64) error {
	if pos := l.Position(); upTo > pos {
		return fmt.Errorf("%w: truncate up to %d, position is %d", ErrPosition, upTo, pos)
	}
	meta, lb := tx.Bucket(metaBucket), tx.Bucket(logBucket)
	if meta == nil || lb == nil {
		return fmt.Errorf("%w: meta or log bucket missing", ErrCorrupt)
	}
	var mark [8]byte
	if t := meta.Get(truncatedKey); len(t) == 8 && binary.BigEndian.Uint64(t) >= upTo {
		upTo = binary.BigEndian.Uint64(t)
	}
	binary.BigEndian.PutUint64(mark[:], upTo)
	if err := meta.Put(truncatedKey, mark[:]); err != nil {
		return err
	}
	c := lb.Cursor()
	// After each Delete the cursor seeks the deleted key again, which
	// lands on the next one: a bbolt cursor may skip an item when Next
	// follows Delete. Seeking from First instead would walk every leaf
	// emptied so far each time, until the commit rebalances them:
	// quadratic in the batches truncated.
	var at [seqKeyLen + 4]byte
	for k, _ := c.First(); k != nil; k, _ = c.Seek(at[:len(k)]) {
		seq, _, err := parseLogKey(k)
		if err != nil {
			return err
		}
		if seq > upTo {
			break
		}
		copy(at[:], k) // the seek's key, kept apart from bbolt's memory
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
}

// recoverCorrupt converts a panic from bbolt reading a garbage page into an
// error wrapping ErrCorrupt; bbolt rolls the transaction back first. A panic
// raised while *inFn (the caller's callback runs) is not ours: it goes on.
func recoverCorrupt(err *error, what string, inFn *bool) {
	if p := recover(); p != nil {
		if *inFn {
			panic(p)
		}
		*err = fmt.Errorf("%w: %s: bbolt panicked: %v", ErrCorrupt, what, p)
	}
}
