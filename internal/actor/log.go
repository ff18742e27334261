package actor

import (
	"sync"

	"github.com/seed7fbd42b6/ratelimit/internal/wal"
)

// Log is where partitions hand the records of each batch; *wal.Log is one.
// Append must not block on disk and must call w.Committed exactly once.
// CommitNow may commit what is pending on the caller's goroutine (a caller
// about to wait for its own commit calls it, holding no partition).
// AppendOwn is Append for a batch whose caller calls CommitNow next.
type Log interface {
	Append(recs []wal.Record, w wal.Waiter)
	AppendOwn(recs []wal.Record, w wal.Waiter)
	Err() error // sticky failure; nil while healthy
	CommitNow()
}

// NopLog is the memory-mode log: everything is "committed" at once.
type NopLog struct{}

func (NopLog) Append(_ []wal.Record, w wal.Waiter)         { w.Committed(nil) }
func (l NopLog) AppendOwn(recs []wal.Record, w wal.Waiter) { l.Append(recs, w) }
func (NopLog) Err() error                                  { return nil }
func (NopLog) CommitNow()                                  {}

// batchWaiter releases one batch's writing messages after their commit.
type batchWaiter struct{ msgs []msg }

var waiterPool = sync.Pool{New: func() any { return new(batchWaiter) }}

// Committed finishes every message (see written).
func (w *batchWaiter) Committed(err error) {
	for _, m := range w.msgs {
		written(m, err)
	}
	clear(w.msgs)
	w.msgs = w.msgs[:0]
	waiterPool.Put(w)
}

// msgWaiter is the waiter of a call sent as one message (Call.oneMsg),
// kept in the call itself: such a call has one waiter at a time, so the
// most common decision needs no pooled batch waiter (whose pool the
// writer, putting waiters back on another processor, keeps emptying).
type msgWaiter struct{ m msg }

func (w *msgWaiter) Committed(err error) {
	m := w.m
	w.m = msg{}
	written(m, err) // may recycle the call, and w with it: last
}

// written marks m's written items with err (if any) and finishes m.
func written(m msg, err error) {
	if err != nil {
		for i := m.lo; i < m.hi; i++ {
			if it := &m.call.Items[i]; it.wrote {
				it.Err = err
			}
		}
	}
	m.call.partDone()
}
