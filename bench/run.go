package main

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed7fbd42b6/ratelimit/internal/cputime"
)

// worker is one concurrent caller. Everything it counts is its own, so the
// measurement adds no shared writes; cells merge workers after they stop.
type worker struct {
	id  int
	wl  *workload
	pos uint32

	calls        int64      // calls made (a limitmany call is one call)
	grantedCalls int64      // calls that granted at least one decision
	decisions    int64      // decisions made
	errs         int64      // decisions that failed with an error
	grants       []uint32   // key index of every granted per-key token, in order: the log's current chunk
	filled       [][]uint32 // the log's earlier chunks, full
	pool         *grantPool // where the chunks come from
	granted      int64      // granted decisions
	firstErr     error

	globalGrants int64 // tokens granted from the scenario's global limit

	hist        hist // latency of sampled calls
	grantedHist hist // latency of the sampled calls that granted something

	batchKeys []string
	batchIdx  []uint32
	batchOK   []bool

	scratch any // implementation-owned per-worker state (ours: request buffers)

	_ [64]byte
}

// next returns the next key index of w's stream.
func (w *worker) next() uint32 {
	i := w.wl.stream[w.pos&w.wl.mask]
	w.pos++
	return i
}

// maxRate bounds the decisions per second of any cell, with room to spare:
// the grant pool is reserved for it before each cell.
const maxRate = 12e6

// grantChunk is how many grants a worker logs in one chunk of the pool.
const grantChunk = 4096

// grantPool hands out chunks of one array, reserved and touched before a
// cell, to the workers' grant logs: however unevenly the grants fall
// among the workers, none of them allocates, or faults fresh pages in,
// while a cell is measured (that would be charged to whichever
// implementation first needed the room), and the memory reserved follows
// the cell's length, not its callers. The zero value is empty.
type grantPool struct {
	buf  []uint32
	next atomic.Int64 // the start of the next chunk to hand out
}

// reserve empties the pool and makes it hold at least n grants, touching
// new memory.
func (p *grantPool) reserve(n int) {
	if len(p.buf) < n {
		p.buf = make([]uint32, n)
		clear(p.buf)
	}
	p.next.Store(0)
}

// chunk returns an empty chunk for a grant log: the pool's next one, or,
// once the pool is used up, new memory.
func (p *grantPool) chunk() []uint32 {
	if end := p.next.Add(grantChunk); end <= int64(len(p.buf)) {
		return p.buf[end-grantChunk : end-grantChunk : end]
	}
	return make([]uint32, 0, grantChunk)
}

// reserveChunks makes room in w's list of filled chunks for n, so that
// logging grants does not allocate unless one worker logs far more than
// its share.
func (w *worker) reserveChunks(n int) {
	if cap(w.filled) < n {
		w.filled = make([][]uint32, 0, n)
	}
}

// logGrant appends key index i to w's grant log.
func (w *worker) logGrant(i uint32) {
	if len(w.grants) == cap(w.grants) {
		if len(w.grants) > 0 {
			w.filled = append(w.filled, w.grants)
		}
		w.grants = w.pool.chunk()
	}
	w.grants = append(w.grants, i)
}

// grantLogs returns w's grant log, in chunks.
func (w *worker) grantLogs() [][]uint32 {
	return append(w.filled[:len(w.filled):len(w.filled)], w.grants) // a copy: filled's spare room stays empty
}

// timedCall makes one call and records its latency in w.hist, and also in
// w.grantedHist if it granted a decision.
func (w *worker) timedCall(call func(impl, *worker, *variant), im impl, v *variant) {
	g, t := w.granted, time.Now()
	call(im, w, v)
	d := time.Since(t)
	w.hist.record(d)
	if w.granted > g {
		w.grantedHist.record(d)
	}
}

// account records a decision on key index i.
func (w *worker) account(i uint32, ok bool, err error) {
	w.decisions++
	switch {
	case err != nil:
		w.fail(err)
	case ok:
		w.granted++
		w.logGrant(i)
	}
}

// accountGlobal records a decision that has no per-key limit.
func (w *worker) accountGlobal(ok bool, err error) {
	w.decisions++
	switch {
	case err != nil:
		w.fail(err)
	case ok:
		w.granted++
		w.globalGrants++
	}
}

// fail records an error; the decision counts as made but neither granted
// nor denied.
func (w *worker) fail(err error) {
	w.errs++
	if w.firstErr == nil {
		w.firstErr = err
	}
}

func (w *worker) reset(batch int) {
	w.pos = w.wl.startPos(w.id)
	w.calls, w.grantedCalls, w.decisions, w.errs, w.granted, w.globalGrants = 0, 0, 0, 0, 0, 0
	clear(w.filled) // the last cell's chunks: let its pool go
	w.grants, w.filled = nil, w.filled[:0]
	w.firstErr = nil
	w.hist.reset()
	w.grantedHist.reset()
	if cap(w.batchKeys) < batch {
		w.batchKeys = make([]string, batch)
		w.batchIdx = make([]uint32, batch)
		w.batchOK = make([]bool, batch)
	}
	w.batchKeys, w.batchIdx, w.batchOK = w.batchKeys[:batch], w.batchIdx[:batch], w.batchOK[:batch]
}

// cell is one measurement: a scenario (and variant), an implementation
// and a number of callers.
type cell struct {
	sc      *scenario
	variant *variant // nil for implementations that do not run variants
	impl    string   // implementation.name
	mode    string   // implementation.mode
	callers int
	dur     time.Duration
	sample  int // time one call in sample
	open    func() (impl, error)
}

func (c *cell) label() string {
	s := c.impl + "/" + c.mode
	if c.variant != nil && c.variant.name != "" {
		s += "/" + c.variant.name
	}
	return s
}

// runner owns the workers, reused from cell to cell so their buffers are
// allocated once and not counted against any implementation.
type runner struct {
	wl      *workload
	workers []*worker
	counts  []uint32 // granted tokens per key, tallied after each cell
	pool    grantPool
}

func newRunner(wl *workload, maxCallers, batch int) *runner {
	r := &runner{wl: wl, counts: make([]uint32, len(wl.keys))}
	for i := range maxCallers {
		w := &worker{id: i, wl: wl, pool: &r.pool}
		w.reset(batch)
		r.workers = append(r.workers, w)
	}
	return r
}

// run measures c. The implementation is opened first (not timed), the
// workers are started and parked, the heap is collected and allocation
// counters read, then the workers are released for c.dur; the figures cover
// the time from release until the last worker returned from its last call.
func (r *runner) run(c *cell, batch int) (*result, error) {
	if !c.sc.batch {
		batch = 0
	}
	im, err := c.open()
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", c.label(), err)
	}
	ws := r.workers[:c.callers]
	chunks := int(maxRate*c.dur.Seconds())/grantChunk + c.callers + 1
	r.pool.reserve(chunks * grantChunk)
	for _, w := range ws {
		w.reset(batch)
		w.reserveChunks(min(chunks, 8*chunks/c.callers+16))
		w.grants = r.pool.chunk()
	}
	v := c.variant
	if v == nil {
		v = &variant{global: c.sc.global}
	}
	call, sample := c.sc.call, max(c.sample, 1)

	var stop atomic.Bool
	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			// Calls until the next timed one; workers start at spread
			// phases, so that the first calls, made in the burst at release,
			// are no more often timed than the others.
			left := w.id * sample / len(ws)
			for !stop.Load() {
				g := w.granted
				if left == 0 {
					w.timedCall(call, im, v)
					left = sample
				} else {
					call(im, w, v)
				}
				left--
				w.calls++
				if w.granted > g {
					w.grantedCalls++
				}
			}
		}()
	}
	runtime.GC()
	lg, _ := im.(logged)
	var log0, log1 logTotals
	if lg != nil {
		log0 = lg.logTotals()
	}
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	cpu0 := cputime.Process()
	t0 := time.Now()
	close(start)
	time.Sleep(c.dur)
	stop.Store(true)
	wg.Wait()
	t1 := time.Now()
	cpu1 := cputime.Process()
	runtime.ReadMemStats(&m1)
	if lg != nil {
		log1 = lg.logTotals() // every acknowledged grant is committed by now
	}
	closeErr := im.close()

	res := &result{
		Scenario: c.sc.name,
		Impl:     c.impl,
		Mode:     c.mode,
		Callers:  c.callers,
		Seconds:  t1.Sub(t0).Seconds(),
		Sample:   sample,
	}
	if c.variant != nil {
		res.Variant = c.variant.name
	}
	if c.sc.batch {
		res.Batch = batch
	}
	var h, hg hist
	var granted int64
	for _, w := range ws {
		res.Calls += w.calls
		res.GrantedCalls += w.grantedCalls
		res.Decisions += w.decisions
		res.Errors += w.errs
		granted += w.granted
		if w.firstErr != nil && res.FirstError == "" {
			res.FirstError = w.firstErr.Error()
		}
		h.merge(&w.hist)
		hg.merge(&w.grantedHist)
	}
	res.Granted = granted
	res.Denied = res.Decisions - granted - res.Errors
	if closeErr != nil && res.FirstError == "" {
		res.Errors++
		res.FirstError = "close: " + closeErr.Error()
	}
	res.fill(&h, &hg, m1.Mallocs-m0.Mallocs, m1.TotalAlloc-m0.TotalAlloc, cpu1-cpu0)
	res.fillLog(log1.minus(log0))
	res.Check = r.check(c, v, ws, t1.Sub(t0))
	return res, nil
}
