package main

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"
)

func TestFillComputesCPUPerDecisionAndCores(t *testing.T) {
	r := &result{Seconds: 2, Decisions: 1000}
	r.fill(&hist{}, &hist{}, 0, 0, 3*time.Millisecond)
	if r.CPUPerDecision != 3000 {
		t.Errorf("CPUPerDecision = %v ns, want 3000", r.CPUPerDecision)
	}
	if r.CPUCores != 0.0015 {
		t.Errorf("CPUCores = %v, want 0.0015", r.CPUCores)
	}
	z := &result{}
	z.fill(&hist{}, &hist{}, 0, 0, time.Second) // no decisions, no time: no division by zero
	if z.CPUPerDecision != 0 || z.CPUCores != 0 {
		t.Errorf("empty cell: CPUPerDecision %v, CPUCores %v; want 0, 0", z.CPUPerDecision, z.CPUCores)
	}
}

// cellWithRuns is a combined result whose runs have these CPU costs per
// decision and rates.
func cellWithRuns(sc, mode string, cpu, rate []float64) *result {
	var runs []*result
	for i := range cpu {
		runs = append(runs, &result{Scenario: sc, Impl: "ours", Mode: mode, Callers: 1024,
			CPUPerDecision: cpu[i], DecisionsPerSec: rate[i], CPUCores: 1})
	}
	return combine(runs)
}

func TestCPURatioIsTheMedianOfRunByRunRatios(t *testing.T) {
	d := cellWithRuns("keys", "durable", []float64{1000, 4000, 9000}, []float64{1, 1, 1})
	m := cellWithRuns("keys", "memory", []float64{1000, 1000, 3000}, []float64{1, 1, 1})
	// Run by run 1, 4 and 3: the median is 3. The ratio of the medians
	// would be 4000 / 1000 = 4.
	if got := ratioOf(d, m).CPU; got != 3 {
		t.Fatalf("CPU ratio = %v, want 3", got)
	}
	none := cellWithRuns("keys", "memory", []float64{0, 0, 0}, []float64{1, 1, 1})
	if got := ratioOf(d, none).CPU; got != 0 {
		t.Fatalf("CPU ratio against an unmeasured cell = %v, want 0", got)
	}
}

// The CPU table pairs each durable cell at a headline caller count with the
// memory cell of the same variant, and is left out when there is none.
func TestPrintCPURatiosPairsDurableWithMemory(t *testing.T) {
	o := &outcome{cfg: &config{callers: []int{1024}}, scenarios: []*scenario{{name: "keys", headline: 1024}, {name: "reserve", headline: 1024}}}
	o.results = []*result{
		cellWithRuns("keys", "durable", []float64{2000}, []float64{5e5}),
		cellWithRuns("keys", "memory", []float64{1000}, []float64{1.5e6}),
		cellWithRuns("reserve", "durable", []float64{3000}, []float64{5e5}),
		// no reserve memory cell: reserve is left out
	}
	var b bytes.Buffer
	if !printCPURatios(&b, o) {
		t.Fatal("printed nothing")
	}
	out := b.String()
	if !strings.Contains(out, "2.00x") || !strings.Contains(out, "ours/durable") {
		t.Errorf("output lacks the keys ratio:\n%s", out)
	}
	if strings.Contains(out, "reserve") {
		t.Errorf("output has a reserve line without its memory cell:\n%s", out)
	}
	b.Reset()
	o.results = o.results[2:]
	if printCPURatios(&b, o) || b.Len() != 0 {
		t.Errorf("no pairs, but printed:\n%s", b.String())
	}
}

func TestSampleEveryTimesEveryCallWhereCallsAreFewOrIOBound(t *testing.T) {
	cfg := &config{sample: 16}
	mem := &implementation{name: "ours", mode: "memory"}
	dur := &implementation{name: "ours", mode: "durable"}
	slow := &implementation{name: "naive", mode: "durable", slow: true}
	remote := &implementation{name: "ours", mode: "redis", remote: true}
	keys, many := &scenario{name: "keys"}, &scenario{name: "limitmany", batch: true}
	for _, c := range []struct {
		im      *implementation
		sc      *scenario
		callers int
		want    int
	}{
		{mem, keys, 1, 16}, {mem, keys, 1024, 16}, {mem, many, 1024, 1},
		{dur, keys, 1, 1}, {dur, keys, 16, 1}, {dur, keys, 17, 16}, {dur, keys, 1024, 16},
		{slow, keys, 1024, 1}, {remote, keys, 1024, 1},
	} {
		if got := sampleEvery(cfg, c.im, c.sc, c.callers); got != c.want {
			t.Errorf("sampleEvery(%s, %s, %d callers) = %d, want %d", c.im.label(), c.sc.name, c.callers, got, c.want)
		}
	}
}

func TestFillLogGroupCommitFigures(t *testing.T) {
	before := logTotals{commits: 10, records: 500, time: time.Second}
	after := logTotals{commits: 14, records: 900, time: time.Second + 2*time.Millisecond}
	r := &result{Seconds: 0.004}
	r.fillLog(after.minus(before))
	if r.Commits != 4 || r.RecordsPerCommit != 100 || r.CommitMean != 500e3 || r.CommitBusy != 0.5 {
		t.Fatalf("commits %d, records/commit %v, mean %v ns, busy %v; want 4, 100, 500000, 0.5",
			r.Commits, r.RecordsPerCommit, r.CommitMean, r.CommitBusy)
	}
	none := &result{Seconds: 1}
	none.fillLog(logTotals{})
	if none.Commits != 0 || none.RecordsPerCommit != 0 || none.CommitMean != 0 || none.CommitBusy != 0 {
		t.Fatalf("a cell without commits has figures: %+v", none)
	}
}

func TestCombineSumsCommitsAndTakesMedians(t *testing.T) {
	var runs []*result
	for i, rpc := range []float64{900, 100, 1000} {
		runs = append(runs, &result{Commits: int64(i + 1), RecordsPerCommit: rpc, CommitMean: rpc * 1e3, CommitBusy: rpc / 2000})
	}
	c := combine(runs)
	if c.Commits != 6 || c.RecordsPerCommit != 900 || c.CommitMean != 900e3 || c.CommitBusy != 0.45 {
		t.Fatalf("combined commits %d, records/commit %v, mean %v, busy %v; want 6, 900, 900000, 0.45",
			c.Commits, c.RecordsPerCommit, c.CommitMean, c.CommitBusy)
	}
}

func TestPrintGroupCommitListsCellsWithCommits(t *testing.T) {
	d := &result{Scenario: "keys", Impl: "ours", Mode: "durable", Callers: 1024,
		Commits: 245, RecordsPerCommit: 989.3, CommitMean: 728.7e3, CommitBusy: 0.44}
	m := &result{Scenario: "keys", Impl: "ours", Mode: "memory", Callers: 1024}
	var b bytes.Buffer
	printGroupCommit(&b, []*result{m, d})
	out := b.String()
	for _, want := range []string{"ours/durable", "245", "989.3", "728.7us", "44%"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "ours/memory") {
		t.Errorf("output lists a cell without commits:\n%s", out)
	}
	if strings.Contains(out, "all of them") {
		t.Errorf("one run, but the heading speaks of several:\n%s", out)
	}
	b.Reset()
	printGroupCommit(&b, []*result{m})
	if b.Len() != 0 {
		t.Errorf("no commits, but printed:\n%s", b.String())
	}
}

// With several runs, the commits column is their total while the others
// are medians, and the heading says so.
func TestPrintGroupCommitSaysCommitsAreATotal(t *testing.T) {
	var runs []*result
	for i, rpc := range []float64{900, 100, 1000} {
		runs = append(runs, &result{Scenario: "keys", Impl: "ours", Mode: "durable", Callers: 1024,
			Commits: int64(100 * (i + 1)), RecordsPerCommit: rpc, CommitMean: 1e6, CommitBusy: 0.4})
	}
	var b bytes.Buffer
	printGroupCommit(&b, []*result{combine(runs)})
	out := b.String()
	for _, want := range []string{"medians of 3 runs except commits, counted over all of them", " 600 ", "900.0"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// The durable grants/s target counts grants: a cell deciding more than
// 300k/s but granting fewer misses it, and the figure is the median of the
// runs' grants/s.
func TestGrantsTargetCountsGrantsNotDecisions(t *testing.T) {
	cell := func(grants ...int64) *result {
		var runs []*result
		for _, g := range grants {
			r := &result{Scenario: "keys", Impl: "ours", Mode: "durable", Callers: 1024,
				Seconds: 1, Decisions: 420_000, Granted: g, Denied: 420_000 - g}
			r.fill(&hist{}, &hist{}, 0, 0, 0)
			runs = append(runs, r)
		}
		return combine(runs)
	}
	grantsTarget := []target{{"durable grants/s", "keys", 1024, "grants/s", "ours/durable", "", ">=", 300_000}}
	status := func(r *result) targetResult {
		return evalTargets(grantsTarget, []*result{r})[0]
	}
	low := cell(310_000, 290_000, 295_000) // median 295k grants, 420k decisions
	if low.GrantsPerSec != 295_000 {
		t.Errorf("GrantsPerSec = %v, want the median run's 295000", low.GrantsPerSec)
	}
	if tg := status(low); tg.Status != targetMissed || tg.Value != 295_000 {
		t.Errorf("420k decisions/s but 295k grants/s: %+v, want missed at 295000", tg)
	}
	if tg := status(low); tg.measured() != "295.0k/s (runs 310.0k/s 290.0k/s 295.0k/s)" {
		t.Errorf("measured %q, want the median and each run", tg.measured())
	}
	if tg := status(cell(305_000, 290_000, 301_000)); tg.Status != targetMet {
		t.Errorf("median 301k grants/s: %+v, want met", tg)
	}
}

// A timed call lands in the granted calls' histogram only if it granted
// something; every timed call lands in the histogram of all calls.
func TestTimedCallSplitsGrantedCalls(t *testing.T) {
	w := &worker{}
	grant := func(_ impl, w *worker, _ *variant) { w.accountGlobal(true, nil) }
	deny := func(_ impl, w *worker, _ *variant) { w.accountGlobal(false, nil) }
	for _, c := range []func(impl, *worker, *variant){grant, deny, deny, grant, deny} {
		w.timedCall(c, nil, nil)
	}
	if w.hist.n != 5 || w.grantedHist.n != 2 {
		t.Fatalf("all calls %d, granted calls %d; want 5 and 2", w.hist.n, w.grantedHist.n)
	}
}

// The durable vs naive target is judged in grants/s, pair by pair: ours'
// cheap durable denials do not count toward it.
func TestNaiveTargetCountsGrants(t *testing.T) {
	cell := func(impl string, decisions int64, grants ...int64) *result {
		var runs []*result
		for _, g := range grants {
			r := &result{Scenario: "keys", Impl: impl, Mode: "durable", Callers: 1024,
				Seconds: 1, Decisions: decisions, Granted: g, Denied: decisions - g}
			r.fill(&hist{}, &hist{}, 0, 0, 0)
			runs = append(runs, r)
		}
		return combine(runs)
	}
	naive := cell("naive", 1_000, 1_000, 1_000, 1_000)
	status := func(ours *result) targetResult {
		for _, tg := range evalTargets(targets, []*result{ours, naive}) {
			if tg.Name == "durable vs naive" && tg.Callers == 1024 {
				return tg
			}
		}
		t.Fatal("no durable vs naive target")
		return targetResult{}
	}
	// 120x in decisions/s, 96x in grants/s (the median run's).
	if tg := status(cell("ours", 120_000, 95_000, 96_000, 99_000)); tg.Status != targetMissed || tg.Value != 96 {
		t.Errorf("96x in grants/s, 120x in decisions/s: %+v, want missed at 96", tg)
	}
	if tg := status(cell("ours", 120_000, 101_000, 99_000, 105_000)); tg.Status != targetMet {
		t.Errorf("101x in grants/s: %+v, want met", tg)
	}
}

// The allocation ratio, like the others, is the median of run-by-run
// ratios, not a ratio of medians.
func TestAllocsRatioPairByPair(t *testing.T) {
	mk := func(allocs ...float64) *result {
		var runs []*result
		for _, a := range allocs {
			runs = append(runs, &result{DecisionsPerSec: 1, AllocsPerDecision: a})
		}
		return &result{Runs: runs, AllocsPerDecision: median(allocs)}
	}
	// Run by run: 1, 1, 1. Medians: 2 / 3.
	q := ratioOf(mk(1, 2, 4), mk(1, 3, 4))
	if q.Allocs == nil || *q.Allocs != 1 {
		t.Fatalf("allocs ratio %v, want 1 (run by run)", q.Allocs)
	}
}

// The disk limit of a durable cell is callers / (mean commit + a call's
// CPU in memory mode), in calls that grant, and the fraction is the
// granted calls made over it; a cell without commits has none.
func TestDiskLimit(t *testing.T) {
	d := &result{Scenario: "keys", Impl: "ours", Mode: "durable", Callers: 100, Seconds: 1,
		Calls: 40_000, GrantedCalls: 30_000, Decisions: 40_000, Commits: 500, CommitMean: 1.9e6, CPUPerDecision: 50e3}
	m := &result{Scenario: "keys", Impl: "ours", Mode: "memory", Callers: 100, CPUPerDecision: 100e3}
	lim, frac := diskLimit(d, m)
	// 100 / (1.9 ms + 0.1 ms) = 50,000 calls/s; 30,000 made.
	if lim != 50_000 || frac != 0.6 {
		t.Errorf("diskLimit = %v, %v; want 50000, 0.6", lim, frac)
	}
	// Without a memory cell the cell's own CPU per decision is used.
	if lim, _ := diskLimit(d, nil); math.Abs(lim-100/(1.95e-3)) > 1e-6 {
		t.Errorf("without memory: %v, want %v", lim, 100/(1.95e-3))
	}
	// A call of a batch costs the CPU of all its decisions.
	b := *d
	b.Decisions = 40_000 * 10
	if lim, _ := diskLimit(&b, m); math.Abs(lim-100/(2.9e-3)) > 1e-6 {
		t.Errorf("batch of 10: %v, want %v", lim, 100/(2.9e-3))
	}
	if lim, frac := diskLimit(m, nil); lim != 0 || frac != 0 {
		t.Errorf("memory cell: %v, %v; want none", lim, frac)
	}
	rs := []*result{d, m}
	computeDiskLimits(rs)
	if d.DiskLimit != 50_000 || d.DiskLimitFraction != 0.6 || m.DiskLimit != 0 {
		t.Errorf("computeDiskLimits: durable %v %v, memory %v", d.DiskLimit, d.DiskLimitFraction, m.DiskLimit)
	}
}
