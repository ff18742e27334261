package main

import (
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
)

// outcome is what a run measured: the input of the summary, the details,
// the JSON and the chart.
type outcome struct {
	cfg       *config
	scenarios []*scenario
	impls     []*implementation // those selected, in table order
	results   []*result
	targets   []targetResult
	failures  []string // correctness failures, one line each
}

// summaryRatios are the summary's ratio columns: of's metric over over's,
// in each row's variant, the median of the run-by-run ratios.
var summaryRatios = []struct{ head, metric, of, over string }{
	{"memory vs striped", "decisions/s", "ours/memory", "striped/memory"},
	{"durable vs naive", "grants/s", "ours/durable", "naive/durable"},
	{"durable cost", "decisions/s", "ours/memory", "ours/durable"},
	{"redis vs redis_rate", "decisions/s", "ours/redis", "redis_rate/redis"},
}

// diskLimitColumn is the implementation whose cells' fraction of the disk
// limit the summary shows.
const diskLimitColumn = "ours/durable"

// Most lines the summary spends on missed targets and on correctness
// failures; -v and stderr list all of them.
const (
	summaryMissedLines  = 2
	summaryFailureLines = 2
)

// summaryRow is a scenario, or one variant of it, at its headline caller
// count.
type summaryRow struct {
	sc      *scenario
	variant string
	first   bool // the scenario's first row
	callers int
}

func (r summaryRow) name() string {
	return strings.TrimSpace(r.sc.name + " " + r.variant)
}

// headlineCallers is the caller count the summary shows for sc: the largest
// run at or below sc.headline, else the smallest run.
func headlineCallers(sc *scenario, callers []int) int {
	best := 0
	for _, n := range callers {
		if n <= sc.headline && n > best {
			best = n
		}
	}
	if best == 0 {
		best = callers[0]
		for _, n := range callers {
			best = min(best, n)
		}
	}
	return best
}

func (o *outcome) summaryRows() []summaryRow {
	var rows []summaryRow
	for _, sc := range o.scenarios {
		if sc.neverDenies {
			continue
		}
		n := headlineCallers(sc, o.cfg.callers)
		if len(sc.variants) == 0 {
			rows = append(rows, summaryRow{sc: sc, first: true, callers: n})
			continue
		}
		for i, v := range sc.variants {
			rows = append(rows, summaryRow{sc: sc, variant: v.name, first: i == 0, callers: n})
		}
	}
	return rows
}

// cell returns the result of im in row, or nil; an implementation that runs
// no variants shows on its scenario's first row only.
func (o *outcome) cell(row summaryRow, im *implementation) *result {
	if !im.variants && !row.first {
		return nil
	}
	v := ""
	if im.variants {
		v = row.variant
	}
	return find(o.results, row.sc.name, row.callers, im.name, im.mode, v)
}

// printSummary writes the short summary: each implementation's decisions/s
// and p99 per scenario at its headline caller count, the ratios that
// matter, the targets, the correctness check and where the details are.
func printSummary(w io.Writer, o *outcome) {
	runs := "1 run"
	if o.cfg.runs > 1 {
		runs = fmt.Sprintf("medians of %d runs", o.cfg.runs)
	}
	fmt.Fprintf(w, "ratelimit bench: %d cells, %s of %v each, GOMAXPROCS %d. Cells: decisions/s, p99 of one call.\n",
		len(o.results), runs, o.cfg.dur, runtime.GOMAXPROCS(0))

	rows := o.summaryRows()
	for _, g := range summaryGroups(o.impls) {
		o.printCellTable(w, rows, g)
	}
	fmt.Fprintln(w)
	if o.printSummaryRatios(w, rows) {
		fmt.Fprintln(w)
	}

	met, missed, notRun := countTargets(o.targets)
	fmt.Fprintf(w, "targets: %d met, %d missed, %d not run (a missed target does not fail the run)\n", met, missed, notRun)
	shown := 0
	for _, t := range o.targets {
		if t.Status != targetMissed {
			continue
		}
		if shown == summaryMissedLines-1 && missed > summaryMissedLines {
			fmt.Fprintf(w, "  and %d more missed: -v lists every target\n", missed-shown)
			break
		}
		fmt.Fprintf(w, "  missed: %s (%s): %s, want %s\n", t.Name, t.where(), t.value(), t.want())
		shown++
	}
	if len(o.failures) == 0 {
		idle := ""
		if n := idleChecks(o.results); n > 0 {
			idle = fmt.Sprintf(" (%d not exercised: idle in -v)", n)
		}
		fmt.Fprintf(w, "correctness: every cell passed the admitted-token check, with no errors%s\n", idle)
	} else {
		fmt.Fprintln(w, "correctness: FAILED (exit status 1):")
		printFailures(w, o.failures)
	}
	if o.cfg.verbose {
		fmt.Fprintln(w, "Details follow; -json FILE writes every figure, -chart FILE.png|.svg draws them.")
	} else {
		fmt.Fprintln(w, "Details: -v (every cell, CPU, group commit, targets), -json FILE, -chart FILE.png|.svg; bench/README.md.")
	}
}

// summaryGroups splits impls, in table order, into the summary's tables of
// cells: the implementations in this process, then those of each remote
// mode (a table's columns are compared with each other only).
func summaryGroups(impls []*implementation) [][]*implementation {
	var local []*implementation
	var modes []string
	remote := map[string][]*implementation{}
	for _, im := range impls {
		if !im.remote {
			local = append(local, im)
			continue
		}
		if !slices.Contains(modes, im.mode) {
			modes = append(modes, im.mode)
		}
		remote[im.mode] = append(remote[im.mode], im)
	}
	var groups [][]*implementation
	if len(local) > 0 {
		groups = append(groups, local)
	}
	for _, m := range modes {
		groups = append(groups, remote[m])
	}
	return groups
}

// printCellTable writes one table of the summary: a column per
// implementation of impls, a row per row of rows in which one of them ran,
// each cell its decisions/s and p99.
func (o *outcome) printCellTable(w io.Writer, rows []summaryRow, impls []*implementation) {
	const cellWidth = 16
	var b strings.Builder
	fmt.Fprintf(&b, "%-14s %7s", "scenario", "callers")
	for _, im := range impls {
		fmt.Fprintf(&b, "  %-*s", cellWidth, im.label())
	}
	line(w, b.String())
	for _, row := range rows {
		if !slices.ContainsFunc(impls, func(im *implementation) bool { return o.ran(row, im) }) {
			continue
		}
		b.Reset()
		fmt.Fprintf(&b, "%-14s %7d", row.name(), row.callers)
		for _, im := range impls {
			s := ""
			if r := o.cell(row, im); r != nil {
				s = fmt.Sprintf("%-7s %s", fmtRate(r.DecisionsPerSec), fmtDur(r.P99))
			} else if im.variants || row.first {
				s = "-"
			}
			fmt.Fprintf(&b, "  %-*s", cellWidth, s)
		}
		line(w, b.String())
	}
}

// ran reports whether im ran in row's scenario (any variant): a row is
// shown, in a table, if one of the table's implementations ran it.
func (o *outcome) ran(row summaryRow, im *implementation) bool {
	return slices.ContainsFunc(o.results, func(r *result) bool {
		return r.Scenario == row.sc.name && r.Impl == im.name && r.Mode == im.mode
	})
}

// printSummaryRatios writes the ratio columns of summaryRatios, and the
// fraction of the disk limit reached, for the rows where they were run; it
// reports whether it wrote anything.
func (o *outcome) printSummaryRatios(w io.Writer, rows []summaryRow) bool {
	type column struct {
		head  string
		value func(row summaryRow) string
	}
	var cols []column
	for _, q := range summaryRatios {
		f := func(r *result) float64 { return metricOf(r, q.metric) }
		value := func(row summaryRow) string {
			a := findIn(o.results, row.sc.name, row.callers, q.of, row.variant)
			b := findIn(o.results, row.sc.name, row.callers, q.over, row.variant)
			if a == nil || b == nil {
				return "-"
			}
			return fmtX(ratioIn(a, b, f))
		}
		cols = append(cols, column{q.head, value})
	}
	cols = append(cols, column{"disk limit", func(row summaryRow) string {
		r := findIn(o.results, row.sc.name, row.callers, diskLimitColumn, row.variant)
		if r == nil {
			return "-"
		}
		return fmtPct(r.DiskLimitFraction)
	}})
	// Columns with nothing to show (their cells were not run) are left out.
	var shown []column
	cells := make([][]string, len(rows))
	for _, c := range cols {
		any := false
		for _, row := range rows {
			if c.value(row) != "-" {
				any = true
			}
		}
		if any {
			shown = append(shown, c)
			for i, row := range rows {
				cells[i] = append(cells[i], c.value(row))
			}
		}
	}
	if len(shown) == 0 {
		return false
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-14s %7s", "scenario", "callers")
	for _, c := range shown {
		fmt.Fprintf(&b, "  %*s", max(len(c.head), 8), c.head)
	}
	line(w, b.String())
	for i, row := range rows {
		// Rows with nothing to show (-mode redis: hot, reserve) are left
		// out too.
		if !slices.ContainsFunc(cells[i], func(s string) bool { return s != "-" }) {
			continue
		}
		b.Reset()
		fmt.Fprintf(&b, "%-14s %7d", row.name(), row.callers)
		for j, c := range shown {
			fmt.Fprintf(&b, "  %*s", max(len(c.head), 8), cells[i][j])
		}
		line(w, b.String())
	}
	// The legend of the columns shown, on one line.
	var legend []string
	has := func(head string) bool {
		return slices.ContainsFunc(shown, func(c column) bool { return c.head == head })
	}
	if slices.ContainsFunc(shown, func(c column) bool { return strings.Contains(c.head, " vs ") }) {
		vs := "vs: ours over the baseline, decisions/s"
		if has("durable vs naive") {
			vs += " (naive: grants/s)"
		}
		legend = append(legend, vs)
	}
	if has("durable cost") {
		legend = append(legend, "durable cost: memory over durable")
	}
	if has("disk limit") {
		legend = append(legend, "disk limit: share reached")
	}
	fmt.Fprintln(w, strings.Join(legend, "; "))
	return true
}

// line writes s without trailing blanks.
func line(w io.Writer, s string) {
	fmt.Fprintln(w, strings.TrimRight(s, " "))
}

// printFailures lists failures, one a line, at most summaryFailureLines
// lines in all.
func printFailures(w io.Writer, failures []string) {
	for i, f := range failures {
		if i == summaryFailureLines-1 && len(failures) > summaryFailureLines {
			fmt.Fprintf(w, "  and %d more: the FAIL lines on stderr list all\n", len(failures)-i)
			return
		}
		fmt.Fprintf(w, "  %s\n", f)
	}
}

// idleChecks counts the cells whose admitted-token check was not
// exercised (see check.Exercised).
func idleChecks(rs []*result) int {
	n := 0
	for _, r := range rs {
		if !r.Check.Exercised {
			n++
		}
	}
	return n
}
