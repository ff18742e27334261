package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
)

// serviceOutcome is what a -service run measured.
type serviceOutcome struct {
	cfg      *config
	started  time.Time
	labels   []string // the services, in table order
	results  []*serviceResult
	targets  []targetResult
	failures []string
}

// serviceResult is one service at one caller count: medians of its runs'
// figures, sums of their counts.
type serviceResult struct {
	Service         string       `json:"service"`        // ratelimitd/durable, ratelimitd/memory or -service-label
	Mode            string       `json:"mode,omitempty"` // durable or memory for ratelimitd
	Addr            string       `json:"addr"`
	Callers         int          `json:"callers"`
	DecisionsPerSec float64      `json:"decisions_per_sec"`
	P50             float64      `json:"p50_ns"`
	P99             float64      `json:"p99_ns"`
	OK              int64        `json:"ok"`
	OverLimit       int64        `json:"over_limit"`
	Errors          int64        `json:"errors"`
	FirstError      string       `json:"first_error,omitempty"`
	HarnessCores    float64      `json:"harness_cores"`
	ServiceCores    float64      `json:"service_cores,omitempty"`
	Runs            []serviceRun `json:"runs"`
}

// combineServiceRuns folds the runs of one service at one caller count.
func combineServiceRuns(label, mode, addr string, callers int, runs []serviceRun) *serviceResult {
	r := &serviceResult{Service: label, Mode: mode, Addr: addr, Callers: callers, Runs: runs}
	var rate, p50, p99, hc, sc []float64
	for _, x := range runs {
		r.OK += x.OK
		r.OverLimit += x.OverLimit
		r.Errors += x.Errors
		if r.FirstError == "" {
			r.FirstError = x.FirstError
		}
		rate, p50, p99 = append(rate, x.DecisionsPerSec), append(p50, x.P50), append(p99, x.P99)
		hc, sc = append(hc, x.HarnessCores), append(sc, x.ServiceCores)
	}
	r.DecisionsPerSec, r.P50, r.P99 = median(rate), median(p50), median(p99)
	r.HarnessCores, r.ServiceCores = median(hc), median(sc)
	return r
}

func findService(rs []*serviceResult, label string, callers int) *serviceResult {
	for _, r := range rs {
		if r.Service == label && r.Callers == callers {
			return r
		}
	}
	return nil
}

// serviceMetric is a run's decisions/s or p99 (ns).
func serviceMetric(r serviceRun, metric string) float64 {
	if metric == "p99" {
		return r.P99
	}
	return r.DecisionsPerSec
}

// serviceGoal is a speed ratelimitd is expected to reach against a
// reference service (envoyproxy/ratelimit with Redis appendfsync always):
// ratelimitd durable's metric over the reference's, at callers.
type serviceGoal struct {
	name      string
	callers   int
	metric    string // decisions/s or p99
	op        string
	threshold float64
}

// serviceTargets are judged by every -service run that has a reference:
// measured in the run (-service-addr) or given (-service-ref).
var serviceTargets = []serviceGoal{
	{"durable vs reference", 256, "decisions/s", ">=", 3},
	{"durable p99 vs reference", 256, "p99", "<", 1},
}

// ourServiceLabel is the ratelimitd the targets judge.
const ourServiceLabel = "ratelimitd/durable"

// refGiven names a reference given by -service-ref in the targets.
const refGiven = "-service-ref"

// evalServiceTargets judges gs: against the external service measured in
// this run (the median of the run-by-run ratios, each run of ours against
// the reference's run beside it), else against -service-ref (our median
// over the given figure), else not run.
func evalServiceTargets(gs []serviceGoal, rs []*serviceResult, sc *serviceConfig) []targetResult {
	var out []targetResult
	for _, g := range gs {
		t := targetResult{Name: g.name, Scenario: "service", Callers: g.callers, Metric: g.metric,
			Of: ourServiceLabel, Op: g.op, Threshold: g.threshold, Status: targetNotRun}
		a := findService(rs, ourServiceLabel, g.callers)
		switch {
		case sc.addr != "":
			t.Over = sc.label
			b := findService(rs, sc.label, g.callers)
			if a == nil || b == nil {
				break
			}
			for i := range min(len(a.Runs), len(b.Runs)) {
				x, y := serviceMetric(a.Runs[i], g.metric), serviceMetric(b.Runs[i], g.metric)
				if y > 0 {
					t.Runs = append(t.Runs, x/y)
				}
			}
			if len(t.Runs) > 0 {
				t.Value = median(slices.Clone(t.Runs))
			}
		case sc.refRate > 0:
			t.Over = refGiven
			if a == nil {
				break
			}
			ref := sc.refRate
			if g.metric == "p99" {
				ref = float64(sc.refP99)
			}
			for _, r := range a.Runs {
				t.Runs = append(t.Runs, serviceMetric(r, g.metric)/ref)
			}
			if g.metric == "p99" {
				t.Value = a.P99 / ref
			} else {
				t.Value = a.DecisionsPerSec / ref
			}
		default:
			t.Over = "reference"
		}
		if len(t.Runs) == 0 {
			t.Runs = nil
			out = append(out, t)
			continue
		}
		t.judge()
		out = append(out, t)
	}
	return out
}

// printServiceSummary writes the short summary: each service's
// decisions/s and p99 at each caller count, durable against the
// reference, the targets, the errors and where the details are.
func printServiceSummary(w io.Writer, o *serviceOutcome) {
	cfg, sc := o.cfg, &o.cfg.svc
	runs := "1 run"
	if cfg.runs > 1 {
		runs = fmt.Sprintf("medians of %d runs", cfg.runs)
	}
	fmt.Fprintf(w, "ratelimit bench -service: gRPC ShouldRateLimit, 1 descriptor a request (%s values, uniform), %d connections; %s of %v after %v warm-up; GOMAXPROCS %d\n",
		fmtCount(sc.keys), sc.conns, runs, sc.dur, sc.warmup, runtime.GOMAXPROCS(0))
	fmt.Fprintln(w, "Per service: decisions/s and p99 latency of one call. durable: every grant in ratelimitd's file before it answers.")

	ref := ""
	if sc.addr != "" && slices.Contains(o.labels, ourServiceLabel) {
		ref = sc.label
	}
	const cellWidth = 18
	var b strings.Builder
	fmt.Fprintf(&b, "%7s", "callers")
	for _, l := range o.labels {
		fmt.Fprintf(&b, "  %-*s", max(cellWidth, len(l)), l)
	}
	if ref != "" {
		b.WriteString("  durable vs " + ref)
	}
	line(w, b.String())
	for _, n := range cfg.callers {
		b.Reset()
		fmt.Fprintf(&b, "%7d", n)
		for _, l := range o.labels {
			s := "-"
			if r := findService(o.results, l, n); r != nil {
				s = fmt.Sprintf("%-7s %s", fmtRate(r.DecisionsPerSec), fmtDur(r.P99))
			}
			fmt.Fprintf(&b, "  %-*s", max(cellWidth, len(l)), s)
		}
		if ref != "" {
			b.WriteString("  " + serviceVs(o.results, ourServiceLabel, ref, n))
		}
		line(w, b.String())
	}
	if ref != "" {
		fmt.Fprintf(w, "durable vs %s: decisions/s over its, then p99 over its; medians of the run-by-run ratios.\n", ref)
	}
	fmt.Fprintln(w)

	met, missed, notRun := countTargets(o.targets)
	fmt.Fprintf(w, "targets: %d met, %d missed, %d not run (a missed target does not fail the run)\n", met, missed, notRun)
	for _, t := range o.targets {
		switch {
		case t.Status == targetNotRun && t.Over == "reference":
			fmt.Fprintf(w, "  not run: %s (%s), want %s: needs a reference, -service-addr or -service-ref (bench/README.md)\n", t.Name, t.where(), t.want())
		case t.Status == targetNotRun:
			fmt.Fprintf(w, "  not run: %s (%s), want %s\n", t.Name, t.where(), t.want())
		default:
			fmt.Fprintf(w, "  %s: %s (%s): %s, want %s%s\n", t.Status, t.Name, t.where(), t.value(), t.want(), refNote(t, sc))
		}
	}
	var ok, over int64
	for _, r := range o.results {
		ok += r.OK
		over += r.OverLimit
	}
	if len(o.failures) == 0 {
		fmt.Fprintf(w, "errors: none (%s OK, %s OVER_LIMIT answers)\n", fmtCount(int(ok)), fmtCount(int(over)))
	} else {
		fmt.Fprintln(w, "errors: FAILED (exit status 1):")
		printFailures(w, o.failures)
	}
	if cfg.verbose {
		fmt.Fprintln(w, "Details follow; -json FILE writes every figure.")
	} else {
		fmt.Fprintln(w, "Details: -v (every cell and run, the rule, every target), -json FILE; bench/README.md.")
	}
}

// refNote says what a judged target's reference was.
func refNote(t targetResult, sc *serviceConfig) string {
	if t.Over == refGiven {
		return fmt.Sprintf(" (reference given, not measured in this run: %s/s, p99 %s)", fmtRate(sc.refRate), fmtDur(float64(sc.refP99)))
	}
	return fmt.Sprintf(" (reference %s, measured in this run)", t.Over)
}

// serviceVs is a's decisions/s and p99 over b's at n callers, medians of
// the run-by-run ratios: "3.12x, p99 0.41x".
func serviceVs(rs []*serviceResult, a, b string, n int) string {
	ra, rb := findService(rs, a, n), findService(rs, b, n)
	if ra == nil || rb == nil {
		return "-"
	}
	ratio := func(metric string) float64 {
		var xs []float64
		for i := range min(len(ra.Runs), len(rb.Runs)) {
			if y := serviceMetric(rb.Runs[i], metric); y > 0 {
				xs = append(xs, serviceMetric(ra.Runs[i], metric)/y)
			}
		}
		return median(xs)
	}
	return fmt.Sprintf("%s, p99 %s", fmtX(ratio("decisions/s")), fmtX(ratio("p99")))
}

// printServiceDetails writes, after the summary, the rule, every cell
// with each run, and every target.
func printServiceDetails(w io.Writer, o *serviceOutcome) {
	fmt.Fprintln(w)
	fmt.Fprintln(w, "The rule (ratelimitd's configuration; a service at -service-addr needs the same):")
	for _, l := range strings.Split(strings.TrimSuffix(serviceRule(o.cfg.svc.limit), "\n"), "\n") {
		fmt.Fprintln(w, "  "+l)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Every cell (decisions/s, p50, p99 and cores the medians of the runs; ok, over and err summed;")
	fmt.Fprintln(w, "cores: CPU seconds a second of ratelimitd's process, and of the harness generating the load):")
	tw, flush := tableWriter(w)
	fmt.Fprintln(tw, "service\tcallers\tdecisions/s\tp50\tp99\tok\tover\terr\tcores\tharness\truns (decisions/s, p99)\t")
	for _, l := range o.labels {
		for _, n := range o.cfg.callers {
			r := findService(o.results, l, n)
			if r == nil {
				continue
			}
			var runs []string
			for _, x := range r.Runs {
				runs = append(runs, fmt.Sprintf("%s %s", fmtRate(x.DecisionsPerSec), fmtDur(x.P99)))
			}
			cores := "-"
			if r.ServiceCores > 0 {
				cores = fmt.Sprintf("%.2f", r.ServiceCores)
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%.2f\t%s\t\n", r.Service, n, fmtRate(r.DecisionsPerSec),
				fmtDur(r.P50), fmtDur(r.P99), r.OK, r.OverLimit, r.Errors, cores, r.HarnessCores, strings.Join(runs, "; "))
		}
	}
	flush()
	for _, r := range o.results {
		if r.FirstError != "" {
			fmt.Fprintf(w, "first error of %s at %d callers: %s\n", r.Service, r.Callers, r.FirstError)
		}
	}
	fmt.Fprintln(w)
	printTargets(w, o.targets, o.cfg.runs)
}

// serviceReport is the -json of a -service run.
type serviceReport struct {
	Started  time.Time         `json:"started"`
	Seconds  float64           `json:"seconds"`
	Machine  machine           `json:"machine"`
	Settings map[string]any    `json:"settings"`
	Rule     string            `json:"rule"`
	Results  []*serviceResult  `json:"results"`
	Targets  []targetResult    `json:"targets"`
	OK       bool              `json:"ok"` // no call failed
	Extra    map[string]string `json:"reference,omitempty"`
}

func writeServiceJSON(path string, o *serviceOutcome, m machine) error {
	cfg, sc := o.cfg, &o.cfg.svc
	rep := &serviceReport{
		Started: o.started,
		Seconds: time.Since(o.started).Seconds(),
		Machine: m,
		Settings: map[string]any{
			"callers": cfg.callers, "runs": cfg.runs, "modes": cfg.modes, "seed": cfg.seed,
			"duration": sc.dur.String(), "warmup": sc.warmup.String(), "conns": sc.conns,
			"keys": sc.keys, "limit_per_minute": sc.limit, "timeout": sc.timeout.String(),
		},
		Rule:    serviceRule(sc.limit),
		Results: o.results,
		Targets: o.targets,
		OK:      len(o.failures) == 0,
	}
	switch {
	case sc.addr != "":
		rep.Extra = map[string]string{"label": sc.label, "addr": sc.addr, "measured": "in this run"}
	case sc.ref != "":
		rep.Extra = map[string]string{"label": refGiven, "given": sc.ref, "measured": "elsewhere"}
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
