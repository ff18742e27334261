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

	calls     int64    // calls made (a limitmany call is one call)
	decisions int64    // decisions made
	errs      int64    // decisions that failed with an error
	grants    []uint32 // key index of every granted per-key token, in order
	granted   int64    // granted decisions
	firstErr  error

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

// maxRate bounds the decisions per second of any cell (the fastest measure
// ~7M/s): the grant logs are reserved for it before each cell.
const maxRate = 12e6

// reserveGrants makes room for n grants in w's grant log and, when that
// takes new memory, touches all of it, so the log does not grow while a
// cell is measured: growing it means page faults on fresh memory, which on
// this VM cost a 1-caller cell up to ~30% of its throughput, and only the
// first implementation of a group to need the room paid them (the first
// run of ours, usually). Memory kept from an earlier cell was touched then.
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
	w.calls, w.decisions, w.errs, w.granted, w.globalGrants = 0, 0, 0, 0, 0
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

// cell is one measurement: a scenario, an implementation and a number of
// callers.
type cell struct {
	sc      *scenario
	variant *variant // nil for baselines of single-variant scenarios
	impl    string   // "ours", "striped", "mutex", "naive"
	mode    string   // "memory" or "durable"
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
				if left == 0 {
					w.timedCall(call, im, v)
					left = sample
				} else {
					call(im, w, v)
				}
				left--
				w.calls++
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

// check verifies that no key and no global limit was granted more tokens
// than its token bucket allows between the workers' release and the end of
// the cell (see limitDef.allowed; every grant falls in that span, and
// counting Open too would loosen the bound by up to a fifth in a durable
// cell), and reports the highest fraction of the allowance any bucket
// used.
func (r *runner) check(c *cell, v *variant, ws []*worker, elapsed time.Duration) check {
	ch := check{OK: true}
	const slack = 1e-9
	if d := c.sc.perKey; d != nil {
		clear(r.counts)
		for _, w := range ws {
			for _, i := range w.grants {
				r.counts[i]++
			}
		}
		allowed := d.allowed(elapsed)
		worst := -1
		for i, n := range r.counts {
			if f := float64(n) / allowed; f > ch.MaxFraction {
				ch.MaxFraction, worst = f, i
			}
		}
		if ch.MaxFraction > 1+slack {
			ch.OK = false
			ch.Detail = fmt.Sprintf("limit %q key %q granted %d tokens, allowed %.1f (capacity %g + %g/s x %.3fs + maxReserved %g)",
				d.name, r.wl.keys[worst], r.counts[worst], allowed, d.capacity, d.rate, elapsed.Seconds(), d.maxReserved)
		}
	}
	if d := v.global; d != nil {
		var n int64
		for _, w := range ws {
			n += w.globalGrants
		}
		allowed := d.allowed(elapsed)
		f := float64(n) / allowed
		ch.MaxFraction = max(ch.MaxFraction, f)
		if f > 1+slack {
			ch.OK = false
			if ch.Detail != "" {
				ch.Detail += "; "
			}
			ch.Detail += fmt.Sprintf("limit %q granted %d tokens, allowed %.1f (capacity %g + %g/s x %.3fs)",
				d.name, n, allowed, d.capacity, d.rate, elapsed.Seconds())
		}
	}
	return ch
}
