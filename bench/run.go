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

	calls        int64    // calls made (a limitmany call is one call)
	grantedCalls int64    // calls that granted at least one decision
	decisions    int64    // decisions made
	errs         int64    // decisions that failed with an error
	grants       []uint32 // key index of every granted per-key token, in order
	granted      int64    // granted decisions
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
// the grant logs are reserved for it before each cell.
const maxRate = 12e6

// reserveGrants makes room for n grants in w's grant log and, when that
// takes new memory, touches all of it, so the log does not grow while a
// cell is measured: page faults on fresh memory would be charged to
// whichever implementation first needed the room.
func (w *worker) reserveGrants(n int) {
	if cap(w.grants) < n {
		w.grants = make([]uint32, 0, n)
		clear(w.grants[:n])
	}
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
		w.grants = append(w.grants, i)
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
	w.grants = w.grants[:0]
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
}

func newRunner(wl *workload, maxCallers, batch int) *runner {
	r := &runner{wl: wl, counts: make([]uint32, len(wl.keys))}
	for i := range maxCallers {
		w := &worker{id: i, wl: wl}
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
	for _, w := range ws {
		w.reset(batch)
		w.reserveGrants(int(maxRate*c.dur.Seconds())/c.callers + 1024)
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
			left := 0 // calls until the next timed one
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
