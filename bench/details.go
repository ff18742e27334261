package main

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// printDetails writes what -v adds after the summary: the limits, every
// cell, the ratios of ours to each other cell, every target, CPU per
// decision and the group-commit figures.
func printDetails(w io.Writer, o *outcome) {
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Limits:")
	for _, sc := range o.scenarios {
		fmt.Fprintf(w, "  %-9s %s\n", sc.name, sc.limitsText())
	}
	fmt.Fprintln(w)
	printCells(w, o.results)
	fmt.Fprintln(w)
	printRatios(w, o.results, o.impls)
	fmt.Fprintln(w)
	printTargets(w, o.targets, o.cfg.runs)
	fmt.Fprintln(w)
	if printCPURatios(w, o) {
		fmt.Fprintln(w)
	}
	printGroupCommit(w, o.results)
}

// tableWriter returns a right-aligned tabwriter whose lines lose their
// trailing blanks; call the returned flush when done.
func tableWriter(out io.Writer) (*tabwriter.Writer, func()) {
	t := &trimWriter{w: out}
	tw := tabwriter.NewWriter(t, 0, 0, 2, ' ', tabwriter.AlignRight)
	return tw, func() { tw.Flush(); t.flush() }
}

// printCells writes every cell's figures, a blank line between groups.
func printCells(out io.Writer, rs []*result) {
	fmt.Fprintln(out, "Every cell (latency of one call; cpu: the whole process's CPU time; check: most-used bucket's share of its allowance; idle: no limit was asked for more than it allows, so the check could not fail):")
	tw, flush := tableWriter(out)
	defer flush()
	fmt.Fprintln(tw, "scenario\tcallers\timplementation\tdecisions/s\tgrants/s\tp50\tp99\tp999\tallocs/dec\tcpu/dec\tcores\tdenied\tcheck\t")
	prev := ""
	for _, r := range rs {
		if key := fmt.Sprint(r.Scenario, r.Callers); prev != "" && key != prev {
			fmt.Fprintln(tw, "\t\t\t\t\t\t\t\t\t\t\t\t\t")
		}
		prev = fmt.Sprint(r.Scenario, r.Callers)
		chk := fmt.Sprintf("ok %.2f", r.Check.MaxFraction)
		if !r.Check.Exercised {
			chk = fmt.Sprintf("idle %.2f", r.Check.MaxFraction)
		}
		if !r.Check.OK {
			chk = "FAIL"
		}
		if r.Errors > 0 {
			chk += fmt.Sprintf(" %d err", r.Errors)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%.2f\t%s\t%.2f\t%.1f%%\t%s\t\n",
			r.Scenario, r.Callers, r.label(), fmtRate(r.DecisionsPerSec), fmtRate(r.GrantsPerSec),
			fmtDur(r.P50), fmtDur(r.P99), fmtDur(r.P999), r.AllocsPerDecision,
			fmtDur(r.CPUPerDecision), r.CPUCores, 100*r.DeniedFraction, chk)
	}
}

// printRatios writes, for every cell of ours, its decisions/s over each
// baseline's and its p50/p99/p999 over the same, and for cells outside
// memory mode the cost against memory mode.
func printRatios(out io.Writer, rs []*result, impls []*implementation) {
	var bases []string
	for _, im := range impls {
		if !im.ours() {
			bases = append(bases, im.name)
		}
	}
	fmt.Fprintln(out, "Ours over each baseline, decisions/s (above 1 favours ours), then latency p50 p99 p999 (below 1 favours ours);")
	fmt.Fprintln(out, "cost: memory-mode decisions/s over this cell's:")
	tw, flush := tableWriter(out)
	defer flush()
	fmt.Fprint(tw, "scenario\tcallers\timplementation\t")
	for _, b := range bases {
		fmt.Fprintf(tw, "x %s\t", b)
	}
	fmt.Fprint(tw, "cost\t")
	for _, b := range bases {
		fmt.Fprintf(tw, "latency vs %s\t", b)
	}
	fmt.Fprintln(tw)
	for _, r := range rs {
		if r.Impl != "ours" {
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t", r.Scenario, r.Callers, r.label())
		for _, b := range bases {
			fmt.Fprintf(tw, "%s\t", fmtX(r.Ratios[b].Throughput))
		}
		cost := "-"
		if r.Mode != "memory" { // memory's decisions/s over this cell's, as the summary's column
			if mem := find(rs, r.Scenario, r.Callers, "ours", "memory", r.Variant); mem != nil {
				cost = fmtX(ratioOf(mem, r).Throughput)
			}
		}
		fmt.Fprintf(tw, "%s\t", cost)
		for _, b := range bases {
			lat := "-"
			if q, ok := r.Ratios[b]; ok {
				lat = fmt.Sprintf("%s %s %s", fmtX(q.P50), fmtX(q.P99), fmtX(q.P999))
			}
			fmt.Fprintf(tw, "%s\t", lat)
		}
		fmt.Fprintln(tw)
	}
}

// printTargets writes every target with its measure and status.
func printTargets(w io.Writer, ts []targetResult, runs int) {
	if runs == 1 {
		fmt.Fprintln(w, "Targets, one run (-runs 3 judges medians of 3):")
	} else {
		fmt.Fprintf(w, "Targets, medians of %d runs (a ratio: the median of the run-by-run ratios):\n", runs)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, t := range ts {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", t.Name, t.where(), t.what(), t.want(), t.measured(), t.Status)
	}
	tw.Flush()
}

// printCPURatios writes, at each scenario's headline caller count, the CPU
// a decision of ours costs outside memory mode over in memory mode, with
// the cores each kept busy; it reports whether it wrote anything. The
// throughput cost is larger wherever the processors idle while a commit
// waits for the disk.
func printCPURatios(w io.Writer, o *outcome) bool {
	tw0 := &trimWriter{w: w}
	tw := tabwriter.NewWriter(tw0, 0, 0, 2, ' ', tabwriter.AlignRight)
	n := 0
	for _, row := range o.summaryRows() {
		mem := find(o.results, row.sc.name, row.callers, "ours", "memory", row.variant)
		if mem == nil {
			continue
		}
		for _, r := range o.results {
			// A remote cell's CPU is this process's only, not its
			// server's: no match for memory mode's.
			if r.Impl != "ours" || r.Mode == "memory" || remoteMode(r.Mode) || r.Scenario != row.sc.name || r.Callers != row.callers || r.Variant != row.variant {
				continue
			}
			if n == 0 {
				fmt.Fprintln(tw, "scenario\tcallers\timplementation\tcpu/dec\tmemory cpu/dec\tratio\tcores\tmemory cores\t")
			}
			n++
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%.2f\t%.2f\t\n", row.name(), row.callers, r.label(),
				fmtDur(r.CPUPerDecision), fmtDur(mem.CPUPerDecision), fmtX(ratioOf(r, mem).CPU), r.CPUCores, mem.CPUCores)
		}
	}
	if n == 0 {
		return false
	}
	fmt.Fprintln(w, "CPU per decision against memory mode, at the headline caller counts (the throughput cost also")
	fmt.Fprintln(w, "counts processors left idle while a commit waits for the disk):")
	tw.Flush()
	tw0.flush()
	return true
}

// printGroupCommit writes, for every cell with commits, how many records a
// commit carried, how long one took, how much of the cell the log spent
// committing, and how close the cell came to the disk's limit.
func printGroupCommit(out io.Writer, rs []*result) {
	var cells []*result
	for _, r := range rs {
		if r.Commits > 0 {
			cells = append(cells, r)
		}
	}
	if len(cells) == 0 {
		return
	}
	runs := 1
	for _, r := range cells {
		runs = max(runs, len(r.Runs))
	}
	if runs == 1 {
		fmt.Fprintln(out, "Group commit (mean commit time, fsyncs included; committing: share of the cell spent committing;")
	} else {
		fmt.Fprintf(out, "Group commit, medians of %d runs except commits, counted over all of them (mean commit time, fsyncs\n", runs)
		fmt.Fprintln(out, "included; committing: share of the cell spent committing;")
	}
	fmt.Fprintln(out, "disk limit: callers / (commit + a call's CPU in memory mode), in calls that grant; reached: the share made):")
	tw, flush := tableWriter(out)
	defer flush()
	fmt.Fprintln(tw, "scenario\tcallers\timplementation\tcommits\trecords/commit\tcommit\tcommitting\tdisk limit\treached\t")
	for _, r := range cells {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%.1f\t%s\t%.0f%%\t%s/s\t%s\t\n", r.Scenario, r.Callers, r.label(),
			r.Commits, r.RecordsPerCommit, fmtDur(r.CommitMean), 100*r.CommitBusy, fmtRate(r.DiskLimit), fmtPct(r.DiskLimitFraction))
	}
}
