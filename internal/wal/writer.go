package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"time"

	bolt "go.etcd.io/bbolt"
)

// pendingBatch is one commit's worth of encoded records and their waiters.
// Two of them alternate: producers fill one while the writer commits the
// other, and both keep their buffers.
type pendingBatch struct {
	buf     []byte // BatchHeaderSize bytes of header space, then records
	count   int
	waiters []Waiter
	own     int // waiters appended with AppendOwn: lone callers, who come back (see settle)
}

func (b *pendingBatch) empty() bool { return len(b.waiters) == 0 }

// releaseRun is how many waiters release calls before it yields the
// processor, so that the callers it has released so far run and append
// again while it releases the rest: a cohort of hundreds released in one
// run would wait for the whole run on the releasing processor, the other
// one being woken only meanwhile.
const releaseRun = 32

// release calls every waiter with err and resets b for reuse.
func (b *pendingBatch) release(err error) {
	for i, w := range b.waiters {
		w.Committed(err)
		b.waiters[i] = nil
		if i%releaseRun == releaseRun-1 && i+1 < len(b.waiters) {
			runtime.Gosched()
		}
	}
	b.waiters = b.waiters[:0]
	b.buf = b.buf[:0]
	b.count, b.own = 0, 0
}

// Append encodes recs into the pending batch and queues w, which is called
// once that batch is committed (or has failed). recs may be reused as soon
// as Append returns. Append never waits for the disk.
//
// If the log has failed or is closed, or a record is too large (ErrTooLarge),
// w.Committed is called with the error before Append returns, and nothing
// is appended. With no records, w is a barrier: it is called once every
// record appended before it is durable (with nil, or the sticky error),
// without a commit of its own.
func (l *Log) Append(recs []Record, w Waiter) { l.append(recs, w, false) }

// AppendOwn is Append for a caller that calls CommitNow next, on the same
// goroutine: when that CommitNow will commit the batch (see lone), the
// writer is not woken for it, a wake-up the caller would only race.
// A caller that does not call CommitNow next must use Append, or its
// batch may wait for the next Append, commit or Close.
func (l *Log) AppendOwn(recs []Record, w Waiter) { l.append(recs, w, true) }

func (l *Log) append(recs []Record, w Waiter, own bool) {
	for _, r := range recs {
		if err := CheckRecord(r); err != nil {
			w.Committed(err)
			return
		}
	}
	l.mu.Lock()
	err := l.Err()
	if l.closing {
		err = ErrClosed
	}
	if err != nil {
		l.mu.Unlock()
		w.Committed(err)
		return
	}
	b := l.pending
	wasEmpty := b.empty()
	if len(b.buf) == 0 {
		b.buf = append(b.buf, make([]byte, BatchHeaderSize)...)
	}
	n := len(b.buf)
	for _, r := range recs {
		b.buf = AppendRecord(b.buf, r)
	}
	if len(b.buf) > BatchHeaderSize+MaxBatchPayload {
		b.buf = b.buf[:n]
		l.mu.Unlock()
		w.Committed(fmt.Errorf("%w: pending batch would exceed %d bytes", ErrTooLarge, MaxBatchPayload))
		return
	}
	b.count += len(recs)
	b.waiters = append(b.waiters, w)
	if own {
		b.own++
	}
	wake := wasEmpty && !(own && l.lone())
	gathered := l.want > 0 && (b.own >= l.want || len(b.buf) >= settleBytes)
	if gathered {
		l.want = 0
	}
	l.mu.Unlock()
	if wake {
		l.signal()
	}
	if gathered {
		notify(l.gathered)
	}
}

// lone reports, with l.mu held, whether a CommitNow would commit what is
// pending now itself. Until that CommitNow, whoever changes this makes
// sure the batch is committed: an awake writer commits what is pending
// before it waits again, a committer wakes the writer if something is
// pending when it is done, and a commit with several waiters (crowd) takes
// the pending batch with it.
func (l *Log) lone() bool {
	return l.idleWriter && !l.committing && !l.crowd && !l.closing
}

func (l *Log) signal() { notify(l.wake) }

// notify sends on c, a 1-buffered channel, unless a send is pending.
func notify(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// run is the writer goroutine: it takes everything pending, commits it in
// one transaction, releases its waiters, and repeats; while idle it tops
// up the preallocated space, a chunk at a time. It exits once closing and
// nothing is pending. Committing (and preallocating) is a role one
// goroutine holds at a time (Log.committing): usually this one, sometimes
// a caller (CommitNow).
func (l *Log) run() {
	defer close(l.done)
	fill := true // preallocation may be due: set again after every commit
	l.mu.Lock()
	for {
		switch {
		case l.committing: // a caller commits: it signals when done
			l.wait()
			fill = true
		case !l.pending.empty():
			l.committing = true
			l.settle()
			l.commitPending()
			fill = true
		case l.closing:
			l.mu.Unlock()
			return
		case fill && l.Err() == nil:
			l.committing = true
			l.mu.Unlock()
			fill = l.prealloc.due() && l.prealloc.fillChunk()
			l.mu.Lock()
			l.committing = false
		default:
			l.wait()
		}
	}
}

// wait, with l.mu held, waits for a signal (an Append to an empty log, a
// caller done committing, Close) with it released.
func (l *Log) wait() {
	l.idleWriter = true
	l.mu.Unlock()
	<-l.wake
	l.mu.Lock()
	l.idleWriter = false
}

// commitPending, with l.mu held and the commit role taken, commits
// everything pending, releases its waiters (with l.mu released) and gives
// the role back.
func (l *Log) commitPending() {
	b := l.pending
	l.pending, l.spare = l.spare, nil
	l.crowd = len(b.waiters) > 1
	l.mu.Unlock()
	took, err := l.commit(b)
	l.mu.Lock()
	// The lone callers pending now are not among those about to be
	// released: once those are back, both are.
	l.cohort = l.pending.own + b.own
	if took > 0 {
		l.typical = typicalCommit(l.typical, took)
	}
	l.mu.Unlock()
	b.release(err)
	l.mu.Lock()
	l.spare = b
	l.committing = false
}

// CommitNow commits what is pending on the caller's goroutine, if the
// writer goroutine is idle, no one else commits and the last batch had one
// waiter: a caller that has just appended, alone, then waits for no other
// goroutine to wake, twice (the writer, then itself). Otherwise it does
// nothing, so that the writer's batches keep growing with the load. It must not be called
// while the caller holds anything the commit's waiters need.
func (l *Log) CommitNow() {
	l.mu.Lock()
	if !l.lone() || l.pending.empty() {
		l.mu.Unlock()
		return
	}
	l.committing = true
	l.commitPending()
	// The writer waits for a signal: it needs one only if there is more
	// to commit, space to preallocate, or Close waits for it. Waking it
	// for nothing costs a lone caller a wake-up per grant.
	wake := !l.pending.empty() || l.closing || l.prealloc.due()
	l.mu.Unlock()
	if wake {
		l.signal()
	}
}

// settleRounds bounds how many times the writer yields before a commit to
// let the cohort fill, and settleBytes is a pending batch big enough not
// to wait at all (see settle). After a gather that timed out, the writer
// only yields for gatherSkip commits before it gathers again, twice as
// many after each miss that follows, up to gatherSkipMost.
const (
	settleRounds   = 4
	settleBytes    = 128 << 10
	gatherSkip     = 16
	gatherSkipMost = 1024
)

// settle, called with l.mu held, the commit role taken and something
// pending, lets the cohort the writer has just released append again
// before it commits. Without it, the writer commits as soon as it has
// released the previous cohort, so it takes only the few callers that
// raced in, and the callers it just released wait a whole commit more:
// commits alternate between a part of the callers and the rest, and each
// caller waits two commits per grant instead of one commit and the time
// its cohort takes to decide. A batch of settleBytes or more commits at
// once: its fsyncs are well amortized already.
//
// The cohort it expects back is the lone callers (waiters appended with
// AppendOwn, each a caller that waits for its own records) it released
// and those already pending: a waiter of a batch of several callers' work
// (a partition's) comes back in another grouping, or not at all. When
// more lone callers are expected than are pending, the writer gathers
// them (see gather). When a gather times out (callers too many to decide
// in a commit's time, or gone to other work), it does not gather again
// for a while (see afterGather); it only yields the processor meanwhile,
// at most settleRounds times while the pending cohort still grows, as a
// caller alone does (one yield, which returns at once). Gathers whose
// cohort came only after their bound, twice in a row, count as a miss too
// (see gatherResult).
func (l *Log) settle() {
	if len(l.pending.buf) >= settleBytes {
		return
	}
	if l.skip == 0 && l.typical > 0 && l.cohort > l.pending.own {
		start := time.Now()
		met := l.gather(l.cohort)
		l.afterGather(gatherResult(met, time.Since(start), l.typical))
		return
	}
	l.skip = max(l.skip-1, 0)
	for range settleRounds {
		n := len(l.pending.waiters)
		l.mu.Unlock()
		runtime.Gosched()
		l.mu.Lock()
		if len(l.pending.waiters) == n || len(l.pending.buf) >= settleBytes {
			return
		}
	}
}

// A gather's outcome: its cohort came within the typical commit that
// bounds the wait (met), came only after it (late), or did not come.
type gatherOutcome int

const (
	gatherMet gatherOutcome = iota
	gatherLate
	gatherMissed
)

// gatherResult is the outcome of a gather that took took and met its
// cohort or not. Callers that the writer has just released and that
// append again at once (a closed loop) are back in a small part of a
// commit. Under an open load, where released callers go elsewhere and new
// ones arrive at random, the count fills only with arrivals, often after
// the bound (the timer can fire late, and arrivals come meanwhile): such
// gathers delay every commit by more than a commit, to take arrivals the
// next commit would take anyway.
func gatherResult(met bool, took, typical time.Duration) gatherOutcome {
	switch {
	case !met:
		return gatherMissed
	case took > typical:
		return gatherLate
	}
	return gatherMet
}

// afterGather sets how many commits pass before the next gather, after
// one with outcome o: none after a gather that met its cohort; after a
// miss, gatherSkip, doubled after every miss that follows (callers that
// do not come back in time, being too many to decide in a commit's time,
// or gone to other work, keep costing a commit's delay ever more rarely).
// A late gather is a miss when the one before it was late too: one alone
// (a collection, a slow wake-up) is no open load.
func (l *Log) afterGather(o gatherOutcome) {
	late := l.late
	l.late = o == gatherLate && !late
	switch {
	case o == gatherMet:
		l.backoff = 0
		return
	case l.late:
		return // the backoff stays as it is
	}
	l.backoff = min(max(2*l.backoff, gatherSkip), gatherSkipMost)
	l.skip = l.backoff
}

// gather, called as settle is, waits until want lone callers are pending (or
// settleBytes), or a typical commit's duration has passed (waiting longer
// than a commit cannot gain: those it waits for would wait a commit more,
// no longer), and reports whether they came. It waits asleep, leaving the
// processors to the callers it waits for: a writer that polled would
// take a processor from them. Close ends the wait. A signal left over
// from an earlier gather (sent after its timer fired) does not end it.
func (l *Log) gather(want int) bool {
	l.timer.Reset(l.typical)
	defer l.timer.Stop()
	for {
		l.want = want
		l.mu.Unlock()
		timedOut := false
		select {
		case <-l.gathered:
		case <-l.timer.C:
			timedOut = true
		}
		l.mu.Lock()
		l.want = 0
		if l.pending.own >= want || len(l.pending.buf) >= settleBytes {
			return true
		}
		if timedOut || l.closing {
			return false
		}
	}
}

// typicalCommit is the typical commit duration after one that took took,
// given the last typical one: a moving average (of weight 1/8) of
// durations each capped at twice the typical one, so that one stalled
// commit (bbolt's lock held by a snapshot or a backup, a slow fsync) does
// not make the gathers that follow wait as long. The first commit sets
// it.
func typicalCommit(typical, took time.Duration) time.Duration {
	if typical <= 0 {
		return took
	}
	return typical + (min(took, 2*typical)-typical)/8
}

// stoppedTimer returns a timer that has not started.
func stoppedTimer() *time.Timer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}

// commit makes b durable as the next log entry and returns how long its
// transaction took (0 when it made none). A batch without records (only
// barrier waiters) needs no transaction: everything before it was
// committed by earlier iterations.
func (l *Log) commit(b *pendingBatch) (took time.Duration, err error) {
	if err := l.Err(); err != nil {
		return 0, err
	}
	if b.count == 0 {
		return 0, nil
	}
	sealBatch(b.buf, b.count)
	seq := l.seq + 1
	start := time.Now()
	err = l.db.Update(func(tx *bolt.Tx) error {
		if err := l.putBatch(tx, seq, b.buf); err != nil {
			return err
		}
		if err := tx.Bucket(metaBucket).Put(committedKey, binary.BigEndian.AppendUint64(nil, seq)); err != nil {
			return err
		}
		if l.opts.BeforeCommit != nil {
			return l.opts.BeforeCommit(seq)
		}
		return nil
	})
	if err != nil {
		err = fmt.Errorf("%w: commit of batch %d (%d records): %w", ErrFailed, seq, b.count, err)
		l.failure.Store(&err)
		l.stats.failed.Add(1)
		l.logger.Error("wal: commit failed; log is now read-only", "seq", seq, "records", b.count, "err", err)
		return 0, err
	}
	l.seq = seq
	l.pos.Store(seq)
	_ = l.db.View(func(tx *bolt.Tx) error { l.prealloc.saw(tx.Size()); return nil })
	l.written.Add(int64(len(b.buf)))
	took = time.Since(start)
	l.stats.record(b.count, len(b.buf), took)
	return took, nil
}

// Close commits everything pending (releasing its waiters), stops the
// writer and closes the file. Appends after Close begins get ErrClosed.
// It returns the log's sticky error, if any commit ever failed, joined with
// any error from closing the file. Later calls return nil.
func (l *Log) Close() error {
	first := false
	l.closeOnce.Do(func() {
		first = true
		l.mu.Lock()
		l.closing = true
		l.mu.Unlock()
		l.signal()
		notify(l.gathered)
		<-l.done
		l.closeErr = l.Err()
		l.prealloc.close()
		if err := l.db.Close(); err != nil {
			l.closeErr = errors.Join(l.closeErr, fmt.Errorf("wal: close: %w", err))
		}
		l.logger.Debug("wal: closed", "position", l.Position())
	})
	if !first {
		return nil
	}
	return l.closeErr
}
