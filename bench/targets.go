package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// target is a speed the library is expected to reach. Every run reports
// each one as met, missed or not run; a missed target never changes the
// exit status (speed on a shared machine is not a correctness question).
type target struct {
	name     string // what it asks, in a few words
	scenario string
	callers  int
	// metric is "decisions/s", "grants/s", or "p50" or "p99" (of one
	// call, in ns).
	metric string
	// of is the label of the cell measured (implementation/mode, and
	// /variant in a scenario with variants).
	of string
	// over, if set, makes the target a ratio: of's metric divided by
	// over's, the median of the run-by-run ratios.
	over      string
	op        string // ">=", ">", "<=" or "<"
	threshold float64
}

// targets are the speeds every run checks.
var targets = []target{
	// In memory, at least as fast as a map of x/time/rate limiters
	// behind striped mutexes, which does less (no exact waits, no
	// reservations, no durability).
	{"memory vs striped", "keys", 1, "decisions/s", "ours/memory", "striped/memory", ">=", 1},
	{"memory vs striped", "keys", 16, "decisions/s", "ours/memory", "striped/memory", ">=", 1},
	{"memory vs striped", "keys", 256, "decisions/s", "ours/memory", "striped/memory", ">=", 1},
	{"memory vs striped", "keys", 1024, "decisions/s", "ours/memory", "striped/memory", ">=", 1},
	{"hot key vs striped", "hot", 1, "decisions/s", "ours/memory/unsharded", "striped/memory", ">=", 1},
	{"hot key vs striped", "hot", 16, "decisions/s", "ours/memory/unsharded", "striped/memory", ">=", 1},
	// All or nothing against Allow on both limiters, which is not.
	{"LimitAll vs striped", "limitall", 256, "decisions/s", "ours/memory", "striped/memory", ">=", 0.75},
	{"LimitMany vs striped", "limitmany", 1, "decisions/s", "ours/memory", "striped/memory", ">", 1},
	{"LimitMany vs striped", "limitmany", 16, "decisions/s", "ours/memory", "striped/memory", ">", 1},
	{"LimitMany vs striped", "limitmany", 256, "decisions/s", "ours/memory", "striped/memory", ">", 1},
	{"LimitMany vs striped", "limitmany", 1024, "decisions/s", "ours/memory", "striped/memory", ">", 1},
	{"sharding pays", "hotgrants", 256, "decisions/s", "ours/memory/shards16", "ours/memory/unsharded", ">", 1},
	// Durable: a lone caller pays one commit, as the naive baseline's one
	// transaction per decision does, and no more.
	{"durable alone vs naive", "keys", 1, "grants/s", "ours/durable", "naive/durable", ">=", 1},
	{"durable alone p50 vs naive", "keys", 1, "p50", "ours/durable", "naive/durable", "<=", 1},
	// Group commit: concurrent callers share fsyncs.
	{"durable vs naive", "keys", 256, "grants/s", "ours/durable", "naive/durable", ">=", 100},
	{"durable vs naive", "keys", 1024, "grants/s", "ours/durable", "naive/durable", ">=", 100},
	{"durable p99", "keys", 256, "p99", "ours/durable", "", "<", 5e6},
	// On Redis (appendfsync always), against go-redis/redis_rate on the
	// same server with a connection per caller: concurrent calls share
	// function calls, and a batch is one.
	{"Redis vs redis_rate", "keys", 256, "decisions/s", "ours/redis", "redis_rate/redis", ">=", 5},
	{"Redis p99 vs redis_rate", "keys", 256, "p99", "ours/redis", "redis_rate/redis", "<", 1},
	{"Redis LimitMany vs redis_rate", "limitmany", 256, "decisions/s", "ours/redis", "redis_rate/redis", ">=", 20},
}

// Statuses of a target.
const (
	targetMet    = "met"
	targetMissed = "missed"
	targetNotRun = "not run" // its cells were not measured
)

// targetResult is a target judged on one run, as written to JSON.
type targetResult struct {
	Name      string    `json:"name"`
	Scenario  string    `json:"scenario"`
	Callers   int       `json:"callers"`
	Metric    string    `json:"metric"`
	Of        string    `json:"of"`
	Over      string    `json:"over,omitempty"`
	Op        string    `json:"op"`
	Threshold float64   `json:"threshold"`
	Value     float64   `json:"value,omitempty"` // the median (of run-by-run ratios for a ratio)
	Runs      []float64 `json:"runs,omitempty"`  // each run's value, with -runs > 1
	Status    string    `json:"status"`
}

// where names the target's cell: "keys, 1024 callers".
func (t *targetResult) where() string {
	return fmt.Sprintf("%s, %d callers", t.Scenario, t.Callers)
}

// want is the condition in words: ">= 100x", "< 5ms", ">= 300,000/s".
func (t *targetResult) want() string {
	switch {
	case t.Over != "":
		return fmt.Sprintf("%s %gx", t.Op, t.Threshold)
	case t.Metric == "p99" || t.Metric == "p50":
		return t.Op + " " + time.Duration(t.Threshold).String()
	}
	return t.Op + " " + fmtCount(int(t.Threshold)) + "/s"
}

// value is the measured value; "-" when not run.
func (t *targetResult) value() string {
	if t.Status == targetNotRun {
		return "-"
	}
	return t.format(t.Value)
}

// measured is the value, and each run's when there were several.
func (t *targetResult) measured() string {
	s := t.value()
	if len(t.Runs) > 1 {
		parts := make([]string, len(t.Runs))
		for i, x := range t.Runs {
			parts[i] = t.format(x)
		}
		s += " (runs " + strings.Join(parts, " ") + ")"
	}
	return s
}

func (t *targetResult) format(x float64) string {
	switch {
	case t.Over != "":
		return fmtX(x)
	case t.Metric == "p99" || t.Metric == "p50":
		return fmtDur(x)
	}
	return fmtRate(x) + "/s"
}

// what says what is compared: "grants/s, ours/durable / naive/durable".
func (t *targetResult) what() string {
	if t.Over == "" {
		return t.Metric + " of " + t.Of
	}
	return t.Metric + ", " + t.Of + " / " + t.Over
}

// evalTargets judges ts against rs (medians when -runs > 1).
func evalTargets(ts []target, rs []*result) []targetResult {
	var out []targetResult
	for _, t := range ts {
		tr := targetResult{Name: t.name, Scenario: t.scenario, Callers: t.callers, Metric: t.metric,
			Of: t.of, Over: t.over, Op: t.op, Threshold: t.threshold, Status: targetNotRun}
		f := func(r *result) float64 { return metricOf(r, t.metric) }
		a := findLabel(rs, t.scenario, t.callers, t.of)
		var b *result
		if t.over != "" {
			b = findLabel(rs, t.scenario, t.callers, t.over)
		}
		if a == nil || (t.over != "" && b == nil) {
			out = append(out, tr)
			continue
		}
		if t.over != "" {
			tr.Runs = runRatios(a, b, f)
			tr.Value = median(slices.Clone(tr.Runs))
		} else {
			tr.Value = f(a)
			for _, r := range a.Runs {
				tr.Runs = append(tr.Runs, f(r))
			}
		}
		tr.judge()
		out = append(out, tr)
	}
	return out
}

// judge sets the status of a measured target from its Value, and drops
// Runs unless there were several.
func (t *targetResult) judge() {
	if len(t.Runs) < 2 {
		t.Runs = nil
	}
	t.Status = targetMissed
	if compare(t.Value, t.Op, t.Threshold) {
		t.Status = targetMet
	}
}

// compare reports whether x op y holds.
func compare(x float64, op string, y float64) bool {
	switch op {
	case ">=":
		return x >= y
	case ">":
		return x > y
	case "<=":
		return x <= y
	case "<":
		return x < y
	}
	panic("bench: unknown comparison " + op)
}

// countTargets returns how many of ts have each status.
func countTargets(ts []targetResult) (met, missed, notRun int) {
	for _, t := range ts {
		switch t.Status {
		case targetMet:
			met++
		case targetMissed:
			missed++
		default:
			notRun++
		}
	}
	return met, missed, notRun
}
