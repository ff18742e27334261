package actor

import (
	"sync"

	"github.com/seed7fbd42b6/ratelimit/wal"
)

// Log is where partitions hand the records of each batch; *wal.Log is one.
// Append must not block on disk and must call w.Committed exactly once.
type Log interface {
	Append(recs []wal.Record, w wal.Waiter)
	Err() error // sticky failure; nil while healthy
}

// NopLog is the memory-mode log: everything is "committed" at once.
type NopLog struct{}

func (NopLog) Append(_ []wal.Record, w wal.Waiter) { w.Committed(nil) }
func (NopLog) Err() error                          { return nil }

// batchWaiter releases one batch's writing messages after their commit.
type batchWaiter struct{ msgs []msg }

var waiterPool = sync.Pool{New: func() any { return new(batchWaiter) }}

// Committed marks the written items of every message with err (if any) and
// finishes the messages.
func (w *batchWaiter) Committed(err error) {
	for _, m := range w.msgs {
		if err != nil {
			for i := m.lo; i < m.hi; i++ {
				if it := &m.call.Items[i]; it.wrote {
					it.Err = err
				}
			}
		}
		m.call.partDone()
	}
	clear(w.msgs)
	w.msgs = w.msgs[:0]
	waiterPool.Put(w)
}
