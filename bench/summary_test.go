package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// hbOutcome is an outcome of every registered scenario and implementation
// at 1024 callers, with made-up figures.
func hbOutcome(t *testing.T) *outcome {
	cfg := hbCfg(t, 100)
	cfg.callers = []int{1, 1024}
	o := &outcome{cfg: cfg, scenarios: buildScenarios(cfg), impls: selectImpls(modeNames(), baselineNames())}
	for _, sc := range o.scenarios {
		for _, im := range o.impls {
			if im.runs != nil && !im.runs(sc) {
				continue
			}
			vs := []string{""}
			if im.variants {
				vs = nil
				for _, v := range sc.variants {
					vs = append(vs, v.name)
				}
				if vs == nil {
					vs = []string{""}
				}
			}
			for _, v := range vs {
				r := &result{Scenario: sc.name, Variant: v, Impl: im.name, Mode: im.mode, Callers: 1024,
					Seconds: 1, Calls: 1e6, GrantedCalls: 5e5, Decisions: 1e6, Granted: 5e5, Check: check{OK: true}}
				if im.mode == "durable" {
					r.Commits, r.CommitMean = 1000, 1e6
				}
				r.fill(&hist{}, &hist{}, 0, 0, 0)
				o.results = append(o.results, r)
			}
		}
	}
	computeDiskLimits(o.results)
	return o
}

// Whatever fails, the summary stays under 30 lines: missed targets and
// correctness failures beyond a few are counted, not listed.
func TestSummaryStaysShortWhenEverythingFails(t *testing.T) {
	o := hbOutcome(t)
	var all []target
	for _, tg := range targets {
		tg.op, tg.threshold = ">", 1e18 // every one missed
		all = append(all, tg)
	}
	all = append(all, all...)
	for _, r := range o.results {
		o.failures = append(o.failures, fmt.Sprintf("%s %s: admitted-token check: too many", r.Scenario, r.label()))
	}
	o.targets = evalTargets(all, o.results)
	var b bytes.Buffer
	printSummary(&b, o)
	out := b.String()
	if n := strings.Count(out, "\n"); n >= 30 {
		t.Errorf("summary has %d lines, want under 30:\n%s", n, out)
	}
	for _, want := range []string{"more missed: -v lists every target", "correctness: FAILED", "more: the FAIL lines on stderr"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
}

// The summary shows each scenario at its headline caller count, a
// baseline once per scenario (not on the second variant's row), and the
// ratios of the cells it has.
func TestSummaryRows(t *testing.T) {
	o := hbOutcome(t)
	o.targets = evalTargets(targets, o.results)
	var b bytes.Buffer
	printSummary(&b, o)
	out := b.String()
	var hot16 string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "hot shards16") && hot16 == "" {
			hot16 = l
		}
	}
	// Name, variant, callers, then ours/memory's and ours/durable's
	// decisions/s and p99; the baselines are left blank.
	if got := len(strings.Fields(hot16)); got != 3+2*2 {
		t.Errorf("first hot shards16 row has %d fields, want 7: %q", got, hot16)
	}
	// 1024 callers / 1 ms commits = 1.024M calls/s could grant; 500k did.
	for _, want := range []string{"keys              1024  1.00M", "1.00x", "49%"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
}

func TestHeadlineCallers(t *testing.T) {
	sc := &scenario{headline: 1024}
	for _, c := range []struct {
		callers []int
		want    int
	}{
		{[]int{1, 16, 256, 1024}, 1024}, {[]int{1, 64}, 64}, {[]int{4096, 2048}, 2048}, {[]int{256, 1, 2000}, 256},
	} {
		if got := headlineCallers(sc, c.callers); got != c.want {
			t.Errorf("headlineCallers(%v) = %d, want %d", c.callers, got, c.want)
		}
	}
}
