package main

import (
	"testing"
)

// A target whose cells ran is met or missed by its comparison; one whose
// cells did not run is "not run"; a ratio is the median of the run-by-run
// ratios.
func TestEvalTargets(t *testing.T) {
	cell := func(label string, callers int, rates ...float64) *result {
		var runs []*result
		for _, x := range rates {
			runs = append(runs, &result{Scenario: "keys", Impl: label, Mode: "memory", Callers: callers, DecisionsPerSec: x, P99: x})
		}
		return combine(runs)
	}
	rs := []*result{cell("a", 1, 10, 20, 30), cell("b", 1, 10, 5, 30)} // run by run 1, 4, 1
	ts := []target{
		{"ratio met", "keys", 1, "decisions/s", "a/memory", "b/memory", "<=", 1},
		{"ratio missed", "keys", 1, "decisions/s", "a/memory", "b/memory", ">", 1},
		{"value met", "keys", 1, "p99", "a/memory", "", "<", 21},
		{"value missed", "keys", 1, "decisions/s", "a/memory", "", ">=", 21},
		{"other callers", "keys", 2, "decisions/s", "a/memory", "", ">=", 0},
		{"other cell", "keys", 1, "decisions/s", "a/memory", "c/memory", ">=", 0},
	}
	want := []struct {
		status string
		value  float64
	}{{targetMet, 1}, {targetMissed, 1}, {targetMet, 20}, {targetMissed, 20}, {targetNotRun, 0}, {targetNotRun, 0}}
	got := evalTargets(ts, rs)
	for i, g := range got {
		if g.Status != want[i].status || g.Value != want[i].value {
			t.Errorf("%s: %s at %v, want %s at %v", g.Name, g.Status, g.Value, want[i].status, want[i].value)
		}
	}
	if r := got[0].Runs; len(r) != 3 || r[0] != 1 || r[1] != 4 || r[2] != 1 {
		t.Errorf("ratio runs %v, want [1 4 1] in run order", r)
	}
	if met, missed, notRun := countTargets(got); met != 2 || missed != 2 || notRun != 2 {
		t.Errorf("counted %d met, %d missed, %d not run; want 2 each", met, missed, notRun)
	}
	for i, w := range map[int]string{0: "<= 1x", 2: "< 21ns", 3: ">= 21/s"} {
		if s := got[i].want(); s != w {
			t.Errorf("%s wants %q, want %q", got[i].Name, s, w)
		}
	}
}

// Every target names a registered scenario, a cell label the harness can
// produce, a known metric and comparison.
func TestTargetsAreWellFormed(t *testing.T) {
	cfg := hbCfg(t, 10)
	labels := map[string]bool{}
	for _, sc := range buildScenarios(cfg) {
		for _, im := range registry {
			labels[sc.name+" "+im.label()] = true
			if im.variants {
				for _, v := range sc.variants {
					labels[sc.name+" "+im.label()+"/"+v.name] = true
				}
			}
		}
	}
	for _, tg := range targets {
		for _, l := range []string{tg.of, tg.over} {
			if l != "" && !labels[tg.scenario+" "+l] {
				t.Errorf("%s: no cell %q in scenario %q", tg.name, l, tg.scenario)
			}
		}
		metricOf(&result{}, tg.metric) // panics if unknown
		compare(0, tg.op, 0)
	}
}
