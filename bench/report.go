package main

import (
	"encoding/json"
	"os"
	"sort"
	"time"
)

// result is one cell's figures, as written to JSON.
type result struct {
	Scenario string `json:"scenario"`
	Variant  string `json:"variant,omitempty"`
	Impl     string `json:"impl"` // implementation name: ours, striped, mutex, naive, ...
	Mode     string `json:"mode"` // memory, durable, ...
	Callers  int    `json:"callers"`
	Batch    int    `json:"batch,omitempty"` // requests per call (limitmany)

	Seconds         float64 `json:"seconds"`
	Calls           int64   `json:"calls"`
	GrantedCalls    int64   `json:"granted_calls"` // calls that granted at least one decision
	Decisions       int64   `json:"decisions"`
	Denied          int64   `json:"denied"`
	Errors          int64   `json:"errors"`
	Granted         int64   `json:"granted"`
	FirstError      string  `json:"first_error,omitempty"`
	DecisionsPerSec float64 `json:"decisions_per_sec"`
	DeniedFraction  float64 `json:"denied_fraction"`
	// GrantsPerSec counts only granted decisions: a durable denial needs
	// no commit, so it is the figure that measures the log.
	GrantsPerSec float64 `json:"grants_per_sec"`

	// Latency of one call (one decision; one batch for limitmany), from
	// every Sample-th call of each worker.
	Sample         int     `json:"latency_sample_every"`
	LatencySamples uint64  `json:"latency_samples"`
	P50            float64 `json:"p50_ns"`
	P99            float64 `json:"p99_ns"`
	P999           float64 `json:"p999_ns"`
	Max            float64 `json:"max_ns"`
	// P99Granted is the p99 of the sampled calls that granted at least
	// one decision: in durable mode, the calls that waited for the disk.
	P99Granted float64 `json:"p99_granted_ns"`

	AllocsPerDecision float64 `json:"allocs_per_decision"`
	BytesPerDecision  float64 `json:"bytes_per_decision"`

	// CPU time (user + system) the whole process spent during the cell,
	// per decision and per second of it (cores busy): the library's
	// goroutines, the runtime's and the kernel's work for them, and the
	// harness's own per-call work, which is the same for every
	// implementation.
	CPUPerDecision float64 `json:"cpu_ns_per_decision"`
	CPUCores       float64 `json:"cpu_cores"`

	// Group commit, for implementations with a log (ours, durable mode):
	// the commits during the cell, the records each carried on average
	// (one per granted bucket), the mean time one took (fsyncs included),
	// and the share of the cell the log spent committing.
	Commits          int64   `json:"wal_commits,omitempty"`
	RecordsPerCommit float64 `json:"wal_records_per_commit,omitempty"`
	CommitMean       float64 `json:"wal_commit_mean_ns,omitempty"`
	CommitBusy       float64 `json:"wal_commit_busy,omitempty"`

	// DiskLimit is the most calls per second that could grant with this
	// commit time: callers / (mean commit + one call's CPU in memory
	// mode), since a caller whose call granted waits for a commit before
	// its next call. DiskLimitFraction is the granted calls per second
	// measured over it: how close the cell ran to the disk's limit.
	DiskLimit         float64 `json:"disk_limit_calls_per_sec,omitempty"`
	DiskLimitFraction float64 `json:"disk_limit_fraction,omitempty"`

	Check check `json:"admitted_check"`

	// Runs holds each run's figures when -runs > 1; the figures above
	// are then medians (figure by figure), the counts sums, and the check
	// the worst run's.
	Runs []*result `json:"runs,omitempty"`

	// Ratios: ours / the cell named by the key (a baseline's name, or
	// "memory" for ours in memory mode), same scenario, callers and run.
	// Throughput > 1 and latency < 1 favour ours.
	Ratios map[string]ratio `json:"ratios,omitempty"`
}

type ratio struct {
	Throughput float64  `json:"throughput"`
	Grants     float64  `json:"grants,omitempty"` // of grants/s; absent where the other cell granted nothing
	P50        float64  `json:"p50"`
	P99        float64  `json:"p99"`
	P999       float64  `json:"p999"`
	Allocs     *float64 `json:"allocs,omitempty"`           // absent when the other cell allocates nothing
	CPU        float64  `json:"cpu_per_decision,omitempty"` // absent where CPU time is not measured
}

// fill sets the figures of a cell from its latency histograms (all timed
// calls, and those that granted), allocation counts and CPU time.
func (r *result) fill(h, granted *hist, mallocs, bytes uint64, cpu time.Duration) {
	if r.Seconds > 0 {
		r.DecisionsPerSec = float64(r.Decisions) / r.Seconds
		r.GrantsPerSec = float64(r.Granted) / r.Seconds
		r.CPUCores = cpu.Seconds() / r.Seconds
	}
	if r.Decisions > 0 {
		r.DeniedFraction = float64(r.Denied) / float64(r.Decisions)
		r.AllocsPerDecision = float64(mallocs) / float64(r.Decisions)
		r.BytesPerDecision = float64(bytes) / float64(r.Decisions)
		r.CPUPerDecision = float64(cpu) / float64(r.Decisions)
	}
	r.LatencySamples = h.n
	r.P50 = float64(h.quantile(0.50))
	r.P99 = float64(h.quantile(0.99))
	r.P999 = float64(h.quantile(0.999))
	r.P99Granted = float64(granted.quantile(0.99))
	r.Max = float64(h.max)
}

// fillLog sets the group-commit figures from the log's totals over the
// cell; a cell without commits has none.
func (r *result) fillLog(t logTotals) {
	r.Commits = int64(t.commits)
	if t.commits == 0 {
		return
	}
	r.RecordsPerCommit = float64(t.records) / float64(t.commits)
	r.CommitMean = float64(t.time) / float64(t.commits)
	if r.Seconds > 0 {
		r.CommitBusy = t.time.Seconds() / r.Seconds
	}
}

// label names the cell's implementation: impl/mode, and /variant when it
// runs one.
func (r *result) label() string {
	s := r.Impl + "/" + r.Mode
	if r.Variant != "" {
		s += "/" + r.Variant
	}
	return s
}

// ok reports whether the cell passed the admitted-token check without
// errors: the harness's correctness test.
func (r *result) ok() bool { return r.Check.OK && r.Errors == 0 }

// decisionsPerCall is how many decisions one call makes.
func (r *result) decisionsPerCall() float64 {
	if r.Calls > 0 {
		return float64(r.Decisions) / float64(r.Calls)
	}
	return 1
}

// grantedCallsPerSec is the rate of calls that granted something.
func (r *result) grantedCallsPerSec() float64 {
	if r.Seconds <= 0 {
		return 0
	}
	return float64(r.GrantedCalls) / r.Seconds
}

// combine folds the runs of one cell into one result.
func combine(runs []*result) *result {
	if len(runs) == 1 {
		return runs[0]
	}
	c := *runs[0]
	c.Runs = runs
	c.Seconds, c.Calls, c.GrantedCalls, c.Decisions, c.Denied, c.Errors, c.Granted, c.LatencySamples, c.Commits = 0, 0, 0, 0, 0, 0, 0, 0, 0
	c.FirstError, c.Check = "", check{OK: true}
	for _, r := range runs {
		c.Seconds += r.Seconds
		c.Calls += r.Calls
		c.GrantedCalls += r.GrantedCalls
		c.Decisions += r.Decisions
		c.Denied += r.Denied
		c.Errors += r.Errors
		c.Granted += r.Granted
		c.LatencySamples += r.LatencySamples
		c.Commits += r.Commits
		if c.FirstError == "" {
			c.FirstError = r.FirstError
		}
		c.Max = max(c.Max, r.Max)
		c.Check.MaxFraction = max(c.Check.MaxFraction, r.Check.MaxFraction)
		c.Check.Exercised = c.Check.Exercised || r.Check.Exercised
		if !r.Check.OK && c.Check.OK {
			c.Check.OK, c.Check.Detail = false, r.Check.Detail
		}
	}
	for _, f := range []func(*result) *float64{
		func(r *result) *float64 { return &r.DecisionsPerSec },
		func(r *result) *float64 { return &r.GrantsPerSec },
		func(r *result) *float64 { return &r.DeniedFraction },
		func(r *result) *float64 { return &r.P50 },
		func(r *result) *float64 { return &r.P99 },
		func(r *result) *float64 { return &r.P99Granted },
		func(r *result) *float64 { return &r.P999 },
		func(r *result) *float64 { return &r.AllocsPerDecision },
		func(r *result) *float64 { return &r.BytesPerDecision },
		func(r *result) *float64 { return &r.CPUPerDecision },
		func(r *result) *float64 { return &r.CPUCores },
		func(r *result) *float64 { return &r.RecordsPerCommit },
		func(r *result) *float64 { return &r.CommitMean },
		func(r *result) *float64 { return &r.CommitBusy },
	} {
		*f(&c) = medianOf(runs, func(r *result) float64 { return *f(r) })
	}
	return &c
}

// medianOf returns the median of f over rs (the mean of the middle two for
// an even count).
func medianOf(rs []*result, f func(*result) float64) float64 {
	xs := make([]float64, len(rs))
	for i, r := range rs {
		xs[i] = f(r)
	}
	return median(xs)
}

// median sorts xs and returns its median (the mean of the middle two for
// an even count); 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	sort.Float64s(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

// find returns the cell of rs with these coordinates, or nil.
func find(rs []*result, sc string, callers int, impl, mode, variant string) *result {
	for _, r := range rs {
		if r.Scenario == sc && r.Callers == callers && r.Impl == impl && r.Mode == mode && r.Variant == variant {
			return r
		}
	}
	return nil
}

// findLabel returns the cell of rs labelled label (impl/mode[/variant]) in
// this scenario and caller count, or nil.
func findLabel(rs []*result, sc string, callers int, label string) *result {
	for _, r := range rs {
		if r.Scenario == sc && r.Callers == callers && r.label() == label {
			return r
		}
	}
	return nil
}

// findIn returns the cell labelled impl/mode in the given variant of the
// scenario, or, for an implementation that runs no variants, its one cell.
func findIn(rs []*result, sc string, callers int, label, variant string) *result {
	if variant != "" {
		if r := findLabel(rs, sc, callers, label+"/"+variant); r != nil {
			return r
		}
	}
	return findLabel(rs, sc, callers, label)
}

// metricOf returns a cell's figure by name: "decisions/s", "grants/s",
// "p50" or "p99" (ns), or "cpu/decision" (ns).
func metricOf(r *result, metric string) float64 {
	switch metric {
	case "decisions/s":
		return r.DecisionsPerSec
	case "grants/s":
		return r.GrantsPerSec
	case "p50":
		return r.P50
	case "p99":
		return r.P99
	case "cpu/decision":
		return r.CPUPerDecision
	}
	panic("bench: unknown metric " + metric)
}

// pairs returns the runs of a and b side by side (run i of a was measured
// beside run i of b), or the two cells themselves when either has one run.
func pairs(a, b *result) [][2]*result {
	if len(a.Runs) < 2 || len(a.Runs) != len(b.Runs) {
		return [][2]*result{{a, b}}
	}
	ps := make([][2]*result, len(a.Runs))
	for i := range a.Runs {
		ps[i] = [2]*result{a.Runs[i], b.Runs[i]}
	}
	return ps
}

// runRatios is a's figure f over b's, pair by pair; 0 where b's is 0.
func runRatios(a, b *result, f func(*result) float64) []float64 {
	var xs []float64
	for _, p := range pairs(a, b) {
		x := 0.0
		if d := f(p[1]); d != 0 {
			x = f(p[0]) / d
		}
		xs = append(xs, x)
	}
	return xs
}

// ratioIn is the median of a's metric over b's, run by run: the two cells
// of a run were measured back to back, on the same state of the machine.
func ratioIn(a, b *result, f func(*result) float64) float64 {
	return median(runRatios(a, b, f))
}

// computeRatios fills Ratios of every ours cell against each comparable
// baseline cell (see comparable) of the same scenario and callers, and,
// for cells of ours outside memory mode, against ours in memory mode in
// the same variant ("memory").
func computeRatios(rs []*result, baselines []*implementation) {
	for _, r := range rs {
		if r.Impl != "ours" {
			continue
		}
		r.Ratios = map[string]ratio{}
		for _, b := range baselines {
			if !comparable(r.Mode, b.mode) {
				continue
			}
			if base := find(rs, r.Scenario, r.Callers, b.name, b.mode, ""); base != nil {
				r.Ratios[b.name] = ratioOf(r, base)
			}
		}
		if r.Mode != "memory" {
			if mem := find(rs, r.Scenario, r.Callers, "ours", "memory", r.Variant); mem != nil {
				r.Ratios["memory"] = ratioOf(r, mem)
			}
		}
	}
}

// ratioOf compares a with b, each figure the median of the run-by-run
// ratios.
func ratioOf(a, b *result) ratio {
	q := ratio{
		Throughput: ratioIn(a, b, func(r *result) float64 { return r.DecisionsPerSec }),
		Grants:     ratioIn(a, b, func(r *result) float64 { return r.GrantsPerSec }),
		P50:        ratioIn(a, b, func(r *result) float64 { return r.P50 }),
		P99:        ratioIn(a, b, func(r *result) float64 { return r.P99 }),
		P999:       ratioIn(a, b, func(r *result) float64 { return r.P999 }),
		CPU:        ratioIn(a, b, func(r *result) float64 { return r.CPUPerDecision }),
	}
	var allocs []float64 // only the pairs where b allocated
	for _, p := range pairs(a, b) {
		if p[1].AllocsPerDecision > 0 {
			allocs = append(allocs, p[0].AllocsPerDecision/p[1].AllocsPerDecision)
		}
	}
	if len(allocs) > 0 {
		x := median(allocs)
		q.Allocs = &x
	}
	return q
}

// computeDiskLimits fills DiskLimit and DiskLimitFraction of every cell
// with commits, run by run and then the median. A call's CPU is taken from
// ours in memory mode in the same variant and run (the decision without
// the log), or the cell's own when that was not run.
func computeDiskLimits(rs []*result) {
	for _, r := range rs {
		if r.Commits == 0 || r.CommitMean <= 0 {
			continue
		}
		mem := find(rs, r.Scenario, r.Callers, "ours", "memory", r.Variant)
		if len(r.Runs) < 2 {
			r.DiskLimit, r.DiskLimitFraction = diskLimit(r, mem)
			continue
		}
		var lims, fracs []float64
		for i, run := range r.Runs {
			var m *result
			if mem != nil && len(mem.Runs) == len(r.Runs) {
				m = mem.Runs[i]
			}
			lim, frac := diskLimit(run, m)
			run.DiskLimit, run.DiskLimitFraction = lim, frac
			if lim > 0 {
				lims, fracs = append(lims, lim), append(fracs, frac)
			}
		}
		r.DiskLimit, r.DiskLimitFraction = median(lims), median(fracs)
	}
}

// diskLimit returns the most granted calls per second r's callers could
// make at r's mean commit time, and the fraction of it r made; mem, if not
// nil, gives the CPU of a call without the log. Zeros when r has no
// commits.
func diskLimit(r, mem *result) (perSec, fraction float64) {
	if r.Commits == 0 || r.CommitMean <= 0 {
		return 0, 0
	}
	cpu := r.CPUPerDecision
	if mem != nil && mem.CPUPerDecision > 0 {
		cpu = mem.CPUPerDecision
	}
	perSec = float64(r.Callers) / ((r.CommitMean + cpu*r.decisionsPerCall()) / 1e9)
	return perSec, r.grantedCallsPerSec() / perSec
}

// report is the JSON document.
type report struct {
	Started  time.Time         `json:"started"`
	Seconds  float64           `json:"seconds"`
	Machine  machine           `json:"machine"`
	Settings map[string]any    `json:"settings"`
	Limits   map[string]string `json:"limits"`
	Results  []*result         `json:"results"`
	Targets  []targetResult    `json:"targets"`
	OK       bool              `json:"ok"` // every admitted-token check passed and no errors
}

func writeJSON(path string, rep *report) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// machine describes where the run happened.
type machine struct {
	GoVersion  string `json:"go_version"`
	GOOS       string `json:"goos"`
	GOARCH     string `json:"goarch"`
	NumCPU     int    `json:"num_cpu"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	CPU        string `json:"cpu,omitempty"`
	Kernel     string `json:"kernel,omitempty"`
	TempDir    string `json:"temp_dir"`
}
