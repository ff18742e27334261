package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// hbMain runs the harness end to end and returns its exit status, stdout
// and stderr.
func hbMain(t *testing.T, cfg *config) (status int, stdout, stderr string) {
	t.Helper()
	cfg.dir = t.TempDir()
	var out, errOut bytes.Buffer
	status = run(cfg, &out, &errOut)
	return status, out.String(), errOut.String()
}

// hbSmall is a config of one scenario, one caller and short cells.
func hbSmall(t *testing.T, modes, baselines []string) *config {
	cfg := hbCfg(t, 1000)
	cfg.dur, cfg.naiveDur = 20*time.Millisecond, 20*time.Millisecond
	cfg.scenarios, cfg.modes, cfg.baselines = []string{"keys"}, modes, baselines
	return cfg
}

// hbRegister registers im for the test's duration.
func hbRegister(t *testing.T, im *implementation) {
	saved := registry
	t.Cleanup(func() { registry = saved })
	registry = slices.Clone(registry)
	register(im)
}

// The default output is a summary of under 30 lines, results only: no
// progress in it, and on a stderr that is not a terminal no progress line
// either, only a plain closing line.
func TestDefaultOutputIsAShortSummary(t *testing.T) {
	cfg := hbCfg(t, 1000)
	cfg.callers = []int{1, 4}
	cfg.dur, cfg.naiveDur = 20*time.Millisecond, 20*time.Millisecond
	cfg.jsonPath = filepath.Join(t.TempDir(), "out.json")
	cfg.chartPath = filepath.Join(t.TempDir(), "chart.png")
	status, out, errOut := hbMain(t, cfg)
	if status != 0 {
		t.Fatalf("exit status %d; stderr:\n%s", status, errOut)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) >= 30 {
		t.Errorf("summary has %d lines, want under 30:\n%s", len(lines), out)
	}
	for _, want := range []string{"ours/memory", "ours/durable", "striped/memory", "mutex/memory", "naive/durable",
		"hot shards16", "durable vs naive", "disk limit", "correctness: every cell passed", "Details: -v"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	for _, l := range lines {
		if len(l) > 120 {
			t.Errorf("line of %d columns: %q", len(l), l)
		}
	}
	if strings.Contains(out, "\r") || strings.Contains(errOut, "\r") {
		t.Errorf("a carriage return where there is no terminal")
	}
	if n := strings.Count(errOut, "\n"); n > 3 {
		t.Errorf("stderr has %d lines, want a few:\n%s", n, errOut)
	}
	if strings.Contains(out, "Every cell") {
		t.Errorf("the summary has the -v details:\n%s", out)
	}

	b, err := os.ReadFile(cfg.jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var rep report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.OK || len(rep.Results) == 0 || len(rep.Targets) != len(targets) {
		t.Errorf("JSON: ok %v, %d results, %d targets", rep.OK, len(rep.Results), len(rep.Targets))
	}
	for _, r := range rep.Results {
		if r.Impl == "ours" && r.Mode == "durable" && (r.DiskLimitFraction <= 0 || r.DiskLimit <= 0) {
			t.Errorf("JSON: %s %s %d callers has no disk limit", r.Scenario, r.label(), r.Callers)
		}
	}
	png, err := os.ReadFile(cfg.chartPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Errorf("chart is not a PNG")
	}
}

// -v adds every cell, the targets and the group-commit table after the
// same summary.
func TestVerboseAddsTheDetails(t *testing.T) {
	cfg := hbSmall(t, []string{"memory", "durable"}, []string{"striped"})
	cfg.verbose = true
	status, out, errOut := hbMain(t, cfg)
	if status != 0 {
		t.Fatalf("exit status %d; stderr:\n%s", status, errOut)
	}
	for _, want := range []string{"ratelimit bench:", "Limits:", "Every cell", "Targets, one run", "Group commit", "reached"} {
		if !strings.Contains(out, want) {
			t.Errorf("-v output lacks %q:\n%s", want, out)
		}
	}
}

// A missed speed target is reported and leaves the exit status 0.
func TestMissedSpeedTargetDoesNotFailTheRun(t *testing.T) {
	cfg := hbSmall(t, []string{"memory"}, []string{"striped"})
	cfg.targets = []target{
		{"impossible", "keys", 1, "decisions/s", "ours/memory", "", ">=", 1e15},
		{"trivial", "keys", 1, "decisions/s", "ours/memory", "striped/memory", ">", 0},
		{"elsewhere", "keys", 4096, "p99", "ours/memory", "", "<", 1},
	}
	status, out, errOut := hbMain(t, cfg)
	if status != 0 {
		t.Errorf("exit status %d with only a speed target missed; stderr:\n%s", status, errOut)
	}
	for _, want := range []string{"targets: 1 met, 1 missed, 1 not run", "missed: impossible (keys, 1 callers)"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// An implementation that over-grants fails the admitted-token check: the
// exit status is 1, the summary and stderr say which cell.
func TestCorrectnessFailureFailsTheRun(t *testing.T) {
	hbRegister(t, &implementation{name: "grantall", mode: "memory", open: func(*cellEnv) (impl, error) {
		return &hbFake{grantAll: true, b: map[mapKey]*rate.Limiter{}}, nil
	}})
	cfg := hbSmall(t, []string{"memory"}, []string{"grantall"})
	status, out, errOut := hbMain(t, cfg)
	if status != 1 {
		t.Errorf("exit status %d with a failed check, want 1", status)
	}
	if !strings.Contains(out, "correctness: FAILED (exit status 1)") || !strings.Contains(out, "grantall/memory") {
		t.Errorf("summary does not name the failure:\n%s", out)
	}
	if !strings.Contains(errOut, "bench: FAIL keys grantall/memory, 1 callers: admitted-token check") {
		t.Errorf("stderr does not name the failure:\n%s", errOut)
	}
}

// errImpl fails every decision.
type errImpl struct{ hbFake }

var errBroken = errors.New("broken")

func (*errImpl) limit(*limitDef, string, bool) (bool, error) { return false, errBroken }

// An implementation that returns errors fails the run too.
func TestErrorsFailTheRun(t *testing.T) {
	hbRegister(t, &implementation{name: "broken", mode: "memory", open: func(*cellEnv) (impl, error) {
		return &errImpl{}, nil
	}})
	status, out, errOut := hbMain(t, hbSmall(t, []string{"memory"}, []string{"broken"}))
	if status != 1 || !strings.Contains(errOut, "errors, the first: broken") || !strings.Contains(out, "FAILED") {
		t.Errorf("exit status %d, stdout:\n%s\nstderr:\n%s", status, out, errOut)
	}
}

// The flags CI passes parse, and the lists default to everything
// registered.
func TestParseFlags(t *testing.T) {
	parse := func(args ...string) (*config, error) {
		fs := flag.NewFlagSet("bench", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		return parseFlags(fs, args)
	}
	cfg, err := parse("-d", "50ms", "-naive-d", "50ms", "-callers", "1,64", "-keys", "100000")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.dur != 50*time.Millisecond || !slices.Equal(cfg.callers, []int{1, 64}) || cfg.nkeys != 100000 {
		t.Errorf("parsed %+v", cfg)
	}
	if !slices.Equal(cfg.scenarios, scenarioNames()) || !slices.Equal(cfg.modes, modeNames()) || !slices.Equal(cfg.baselines, baselineNames()) {
		t.Errorf("defaults: scenarios %v, modes %v, baselines %v", cfg.scenarios, cfg.modes, cfg.baselines)
	}
	if cfg, err := parse("-callers", "16,1,16"); err != nil || !slices.Equal(cfg.callers, []int{16, 1}) {
		t.Errorf("-callers 16,1,16: %v %v, want [16 1]", err, cfg.callers)
	}
	if cfg, err := parse("-baselines", "", "-mode", "durable", "-scenario", "hot,keys"); err != nil || len(cfg.baselines) != 0 ||
		!slices.Equal(cfg.modes, []string{"durable"}) || !slices.Equal(cfg.scenarios, []string{"hot", "keys"}) {
		t.Errorf("-baselines \"\" -mode durable -scenario hot,keys: %v %v %v %v", err, cfg.baselines, cfg.modes, cfg.scenarios)
	}
	for _, bad := range [][]string{
		{"-chart", "out.jpg"}, {"-mode", "disk"}, {"-baselines", "redis"}, {"-scenario", "nope"},
		{"-callers", "0"}, {"-runs", "0"}, {"extra"}, {"-key-burst", "1.9"}, {"-hot-rate", "15"}, {"-sample", "2000000"},
	} {
		if _, err := parse(bad...); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// The first group's cells run once more, unmeasured, before it; every
// run of a group visits it in runOrder's order. Three fake baselines log
// their opens: with ours first, the group is ours, fa, fb, fc, which the
// runs visit as ours fa fb fc, fa ours fc fb and fb fc ours fa.
func TestRunsRotateAfterAWarmUp(t *testing.T) {
	var opens []string
	for _, name := range []string{"fa", "fb", "fc"} {
		hbRegister(t, &implementation{name: name, mode: "memory", open: func(e *cellEnv) (impl, error) {
			opens = append(opens, fmt.Sprintf("%s@%d", name, e.callers))
			return &hbFake{rateMul: 1, b: map[mapKey]*rate.Limiter{}}, nil
		}})
	}
	cfg := hbSmall(t, []string{"memory"}, []string{"fa", "fb", "fc"})
	cfg.callers, cfg.runs = []int{1, 4}, 3
	if status, _, errOut := hbMain(t, cfg); status != 0 {
		t.Fatalf("exit status %d; stderr:\n%s", status, errOut)
	}
	want := strings.Fields(`
		fa@1 fb@1 fc@1
		fa@1 fb@1 fc@1  fa@1 fc@1 fb@1  fb@1 fc@1 fa@1
		fa@4 fb@4 fc@4  fa@4 fc@4 fb@4  fb@4 fc@4 fa@4`)
	if !slices.Equal(opens, want) {
		t.Errorf("opens\n%v\nwant (a warm-up of the first group, then runs in runOrder's orders)\n%v", opens, want)
	}
}

// Every run's order visits each cell of the group once, and over three
// runs no cell of a group of two or more always has the same cell before
// it (or always comes first).
func TestRunOrder(t *testing.T) {
	for size := 1; size <= 12; size++ {
		before := make([]map[int]bool, size) // -1: first
		for k := range before {
			before[k] = map[int]bool{}
		}
		for n := range 3 {
			order := runOrder(n, size)
			seen := make([]bool, size)
			for _, k := range order {
				seen[k] = true
			}
			if len(order) != size || slices.Contains(seen, false) {
				t.Fatalf("runOrder(%d, %d) = %v: not every cell once", n, size, order)
			}
			for m, k := range order {
				prev := -1
				if m > 0 {
					prev = order[m-1]
				}
				before[k][prev] = true
			}
		}
		for k := range before {
			if size >= 2 && len(before[k]) < 2 {
				t.Errorf("size %d: cell %d comes after %v in every run", size, k, before[k])
			}
		}
	}
}
