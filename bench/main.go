// Command bench measures the ratelimit library against what a Go programmer
// would otherwise use: a map of golang.org/x/time/rate limiters behind 64
// striped mutexes, the same behind one mutex, and a naive durable limiter
// (one fsynced bbolt transaction per decision). Every scenario runs at
// several caller counts; each (scenario, callers) group runs ours and the
// baselines back to back, and ours is reported as a ratio to each of them.
//
// Run it with `go run ./bench`; `go run ./bench -h` lists the flags and
// bench/README.md explains the table.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/seed7fbd42b6/ratelimit"
)

// config is the parsed command line.
type config struct {
	dur         time.Duration
	naiveDur    time.Duration
	callers     []int
	nkeys       int
	scenarios   string
	mode        string
	baselines   []string
	jsonPath    string
	sample      int
	batch       int
	runs        int
	partitions  int
	preallocate int64
	zipfS       float64
	zipfV       float64
	keyRate     float64
	keyBurst    float64
	hotRate     float64
	dir         string
	seed        uint64
	cpuProfile  string

	wl *workload
}

const streamLen = 1 << 22 // precomputed Zipf key indices (16 MiB)

func parseFlags() (*config, error) {
	c := &config{}
	fs := flag.CommandLine
	fs.DurationVar(&c.dur, "d", 400*time.Millisecond, "measured duration of each cell (one scenario x implementation x caller count)")
	fs.DurationVar(&c.naiveDur, "naive-d", 200*time.Millisecond, "measured duration of each naive-durable cell (it decides ~3,000/s; callers still queued when it ends are drained and counted)")
	callers := fs.String("callers", "1,16,256,1024", "comma-separated numbers of concurrent callers")
	fs.IntVar(&c.nkeys, "keys", 1_000_000, "distinct keys, built before measuring")
	fs.StringVar(&c.scenarios, "scenario", "all", "comma-separated scenarios to run: "+strings.Join(scenarioNames, ", ")+", or all")
	fs.StringVar(&c.mode, "mode", "all", "our limiter's modes: memory, durable (bbolt file in a temp dir) or all; the naive durable baseline runs only with durable")
	baselines := fs.String("baselines", "striped,mutex,naive", "comma-separated baselines: striped (64 mutexes), mutex (one), naive (bbolt Update per decision); \"\" for none")
	fs.StringVar(&c.jsonPath, "json", "", "also write the results as JSON to `FILE`")
	fs.IntVar(&c.sample, "sample", 16, fmt.Sprintf("time every Nth call per worker (a clock read costs ~50 ns, as much as a baseline decision); durable cells with at most %d callers, naive and limitmany cells time every call", ioBoundCallers))
	fs.IntVar(&c.runs, "runs", 1, "measure every cell this many times (round-robin within its scenario and caller count) and report medians; the issue's targets are judged on medians of 3")
	fs.IntVar(&c.batch, "batch", 64, "requests per LimitMany call")
	fs.IntVar(&c.partitions, "partitions", 0, "Options.Partitions of our limiter (0: library default)")
	fs.Int64Var(&c.preallocate, "log-preallocate", 0, "Options.LogPreallocate of our limiter in durable mode, in bytes (0: library default, 64 MiB; -1: none)")
	fs.Float64Var(&c.zipfS, "zipf-s", 1.1, "Zipf exponent s (> 1) of key popularity: key of rank k is drawn with probability proportional to (v+k)^-s")
	fs.Float64Var(&c.zipfV, "zipf-v", 1, "Zipf offset v (>= 1)")
	fs.Float64Var(&c.keyRate, "key-rate", 2000, "per-key limit: tokens per second (keys, limitall, reserve, limitmany)")
	fs.Float64Var(&c.keyBurst, "key-burst", 200, "per-key limit: capacity; also MaxReserved in the reserve scenario")
	fs.Float64Var(&c.hotRate, "hot-rate", 500_000, "global limit: tokens per second, capacity a tenth of it (hot, limitall)")
	fs.StringVar(&c.dir, "dir", "", "parent of the temporary directory for bbolt files (default: the system temp dir); the directory is removed at exit")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the key stream")
	fs.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of the measured cells to `FILE` (read it with go tool pprof)")
	fs.Usage = usage
	flag.Parse()
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}

	for _, f := range strings.Split(*callers, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-callers: bad count %q", f)
		}
		c.callers = append(c.callers, n)
	}
	if *baselines != "" {
		for _, b := range strings.Split(*baselines, ",") {
			b = strings.TrimSpace(b)
			if !slices.Contains(baselineNames, b) {
				return nil, fmt.Errorf("-baselines: unknown baseline %q (have %s)", b, strings.Join(baselineNames, ", "))
			}
			c.baselines = append(c.baselines, b)
		}
	}
	switch {
	case c.mode != "memory" && c.mode != "durable" && c.mode != "all":
		return nil, fmt.Errorf("-mode must be memory, durable or all, not %q", c.mode)
	case c.dur <= 0 || c.naiveDur <= 0:
		return nil, fmt.Errorf("-d and -naive-d must be > 0")
	case c.nkeys < 1 || c.nkeys > 1<<31:
		return nil, fmt.Errorf("-keys must be in [1, 2^31]")
	case !validScenarios(c.scenarios):
		return nil, fmt.Errorf("-scenario: want a comma-separated list of %s, or all", strings.Join(scenarioNames, ", "))
	case c.sample < 1:
		return nil, fmt.Errorf("-sample must be >= 1")
	case c.runs < 1:
		return nil, fmt.Errorf("-runs must be >= 1")
	case c.batch < 1:
		return nil, fmt.Errorf("-batch must be >= 1")
	case c.zipfS <= 1 || c.zipfV < 1:
		return nil, fmt.Errorf("-zipf-s must be > 1 and -zipf-v >= 1")
	case c.keyRate <= 0 || c.keyBurst < 1 || c.hotRate < 10:
		return nil, fmt.Errorf("-key-rate must be > 0, -key-burst >= 1 and -hot-rate >= 10")
	}
	return c, nil
}

func usage() {
	out := flag.CommandLine.Output()
	fmt.Fprint(out, `Usage: go run ./bench [flags]

Measures the ratelimit library, in memory and durable (bbolt) mode, against
baselines on the same workload in the same run: a map of x/time/rate
limiters behind 64 striped mutexes ("striped"), the same behind one mutex
("mutex"), and one fsynced bbolt transaction per decision ("naive").

Scenarios (each at every -callers count):
  keys       Limit on -keys distinct keys, Zipf-skewed, about a third denied
  hot        Limit on one global key: unsharded, and Shards: 16 (ours only)
  limitall   LimitAll of a per-user limit and a global limit
  reserve    Limit with Reserve: true, debt up to MaxReserved
  limitmany  LimitMany with -batch independent requests per call
             (baselines decide the same requests one at a time)

Each cell reports decisions/s, p50/p99/p999 latency of a call, allocations
per decision, the process's CPU time per decision and cores busy (on Unix),
the fraction denied, and the admitted-token check: no key or
global limit may be granted more than capacity + rate x elapsed (+
MaxReserved). A failed check or any error makes the exit status 1.

The table goes to stdout, progress to stderr. The default run takes under
a minute.

Flags:
`)
	flag.PrintDefaults()
}

func main() {
	cfg, err := parseFlags()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	os.Exit(run(cfg))
}

func run(cfg *config) int {
	started := time.Now()
	tmp, err := os.MkdirTemp(cfg.dir, "ratelimit-bench-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 2
	}
	defer os.RemoveAll(tmp)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sig
		os.RemoveAll(tmp)
		fmt.Fprintln(os.Stderr, "bench: interrupted; removed", tmp)
		os.Exit(130)
	}()

	t := time.Now()
	cfg.wl = buildWorkload(cfg.nkeys, cfg.zipfS, cfg.zipfV, streamLen, cfg.seed)
	scs, err := selectScenarios(buildScenarios(cfg), cfg.scenarios)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 2
	}
	fmt.Fprintf(os.Stderr, "built %d keys and a %d-request Zipf(s=%g, v=%g) stream in %v; temp dir %s\n",
		cfg.nkeys, streamLen, cfg.zipfS, cfg.zipfV, time.Since(t).Round(time.Millisecond), tmp)

	if cfg.cpuProfile != "" {
		f, err := os.Create(cfg.cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 2
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 2
		}
		defer pprof.StopCPUProfile()
	}
	cells := plan(cfg, scs, tmp)
	r := newRunner(cfg.wl, slices.Max(cfg.callers), cfg.batch)
	var results []*result
	failed := false
	group, ngroups := 0, len(scs)*len(cfg.callers)
	for i := 0; i < len(cells); {
		j := i
		for j < len(cells) && cells[j].sc == cells[i].sc && cells[j].callers == cells[i].callers {
			j++
		}
		group++
		// Run the group's cells round-robin, runs times, so that every
		// run of ours has its baselines measured right beside it.
		per := make([][]*result, j-i)
		for range cfg.runs {
			for k, c := range cells[i:j] {
				res, err := r.run(c, cfg.batch)
				if err != nil {
					fmt.Fprintf(os.Stderr, "bench: FAIL %s %s callers=%d: %v\n", c.sc.name, c.label(), c.callers, err)
					failed = true
					continue
				}
				per[k] = append(per[k], res)
				if !res.Check.OK {
					failed = true
					fmt.Fprintf(os.Stderr, "bench: FAIL admitted-token check: %s %s callers=%d: %s\n", res.Scenario, res.label(), res.Callers, res.Check.Detail)
				}
				if res.Errors > 0 {
					failed = true
					fmt.Fprintf(os.Stderr, "bench: FAIL %d errors: %s %s callers=%d: first: %s\n", res.Errors, res.Scenario, res.label(), res.Callers, res.FirstError)
				}
			}
		}
		var parts []string
		for _, runs := range per {
			if len(runs) == 0 {
				continue
			}
			res := combine(runs)
			results = append(results, res)
			parts = append(parts, fmt.Sprintf("%s %s/s", res.label(), fmtRate(res.DecisionsPerSec)))
		}
		fmt.Fprintf(os.Stderr, "[%2d/%d %5.1fs] %s callers=%d: %s\n", group, ngroups, time.Since(started).Seconds(),
			cells[i].sc.name, cells[i].callers, strings.Join(parts, ", "))
		i = j
	}

	computeRatios(results)
	targets := evalTargets(results)
	fmt.Println("Limits:")
	limits := describeLimits(scs)
	for _, s := range scs {
		fmt.Printf("  %-9s %s\n", s.name, limits[s.name])
	}
	fmt.Println()
	printTable(os.Stdout, results)
	fmt.Println()
	printTargets(os.Stdout, targets, cfg.runs)
	fmt.Println()
	printCPURatios(os.Stdout, results)
	fmt.Println()
	printGroupCommit(os.Stdout, results)
	fmt.Fprintf(os.Stderr, "total %.1fs\n", time.Since(started).Seconds())

	if cfg.jsonPath != "" {
		rep := &report{
			Started:  started,
			Seconds:  time.Since(started).Seconds(),
			Machine:  describeMachine(tmp),
			Settings: settings(cfg),
			Limits:   limits,
			Results:  results,
			Targets:  targets,
			OK:       !failed,
		}
		if err := writeJSON(cfg.jsonPath, rep); err != nil {
			fmt.Fprintln(os.Stderr, "bench: writing JSON:", err)
			return 1
		}
	}
	if failed {
		fmt.Fprintln(os.Stderr, "bench: FAILED: see the FAIL lines above")
		return 1
	}
	return 0
}

// plan lists the cells in run order: by scenario, then caller count, then
// ours (memory, durable; each variant) and the baselines back to back, so
// that every ratio compares cells measured seconds apart.
func plan(cfg *config, scs []*scenario, tmp string) []*cell {
	var cells []*cell
	seq := 0
	path := func(name string) string {
		seq++
		return filepath.Join(tmp, fmt.Sprintf("%03d-%s.db", seq, name))
	}
	memory := cfg.mode == "memory" || cfg.mode == "all"
	durable := cfg.mode == "durable" || cfg.mode == "all"
	for _, sc := range scs {
		defs := sc.defs()
		for _, n := range cfg.callers {
			variants := sc.variants
			if len(variants) == 0 {
				variants = []variant{{}}
			}
			sample := cfg.sample
			if sc.batch {
				sample = 1
			}
			for _, mode := range []string{"memory", "durable"} {
				if (mode == "memory" && !memory) || (mode == "durable" && !durable) {
					continue
				}
				for vi := range variants {
					v := &variants[vi]
					c := &cell{sc: sc, impl: "ours", mode: mode, callers: n, dur: cfg.dur, sample: sample}
					if v.name != "" {
						c.variant = v
					}
					if mode == "durable" {
						c.sample = durableSample(sample, n)
						c.open = func() (impl, error) {
							p := path(sc.name)
							im, err := openOurs(ratelimit.Options{Path: p, Partitions: cfg.partitions, LogPreallocate: cfg.preallocate}, defs)
							return removeOnClose(im, p), err
						}
					} else {
						c.open = func() (impl, error) { return openOurs(ratelimit.Options{Partitions: cfg.partitions}, defs) }
					}
					cells = append(cells, c)
				}
			}
			for _, b := range cfg.baselines {
				c := &cell{sc: sc, impl: b, mode: "memory", callers: n, dur: cfg.dur, sample: sample}
				switch b {
				case "striped":
					c.open = func() (impl, error) { return newMapLimiter(64), nil }
				case "mutex":
					c.open = func() (impl, error) { return newMapLimiter(1), nil }
				case "naive":
					// The naive limiter's LimitMany would be -batch
					// Updates in a row: the same per-decision cost as
					// the keys scenario, and 1024 callers x 64 queued
					// commits would take 20 s to drain.
					if !durable || sc.batch {
						continue
					}
					c.mode, c.dur, c.sample = "durable", cfg.naiveDur, 1
					c.open = func() (impl, error) {
						p := path("naive")
						im, err := openNaive(p)
						if err != nil {
							return nil, err
						}
						return removeOnClose(im, p), nil
					}
				}
				cells = append(cells, c)
			}
		}
	}
	return cells
}

// defs returns every limit the scenario uses, for Options.Limits.
func (sc *scenario) defs() []*limitDef {
	var ds []*limitDef
	add := func(d *limitDef) {
		if d != nil && !slices.Contains(ds, d) {
			ds = append(ds, d)
		}
	}
	add(sc.perKey)
	add(sc.global)
	for _, v := range sc.variants {
		add(v.global)
	}
	return ds
}

func describeLimits(scs []*scenario) map[string]string {
	m := map[string]string{}
	for _, sc := range scs {
		var parts []string
		for _, d := range sc.defs() {
			parts = append(parts, d.String())
		}
		m[sc.name] = strings.Join(parts, "; ")
	}
	return m
}

// fileImpl removes an implementation's files when it closes, so a long run
// does not fill the temp dir.
type fileImpl struct {
	impl
	path string
}

func removeOnClose(im impl, path string) impl {
	if im == nil {
		return nil
	}
	return &fileImpl{im, path}
}

func (f *fileImpl) close() error {
	err := f.impl.close()
	matches, _ := filepath.Glob(f.path + "*")
	for _, m := range matches {
		os.RemoveAll(m)
	}
	return err
}

// logTotals are the wrapped implementation's, if it has a log.
func (f *fileImpl) logTotals() logTotals {
	if lg, ok := f.impl.(logged); ok {
		return lg.logTotals()
	}
	return logTotals{}
}

func settings(cfg *config) map[string]any {
	return map[string]any{
		"duration":        cfg.dur.String(),
		"naive_duration":  cfg.naiveDur.String(),
		"callers":         cfg.callers,
		"keys":            cfg.nkeys,
		"scenarios":       cfg.scenarios,
		"mode":            cfg.mode,
		"baselines":       cfg.baselines,
		"latency_sample":  cfg.sample,
		"batch":           cfg.batch,
		"runs":            cfg.runs,
		"partitions":      cfg.partitions,
		"log_preallocate": cfg.preallocate,
		"zipf_s":          cfg.zipfS,
		"zipf_v":          cfg.zipfV,
		"key_rate":        cfg.keyRate,
		"key_burst":       cfg.keyBurst,
		"hot_rate":        cfg.hotRate,
		"stream_requests": streamLen,
		"seed":            cfg.seed,
	}
}

func describeMachine(tmp string) machine {
	m := machine{
		GoVersion:  runtime.Version(),
		GOOS:       runtime.GOOS,
		GOARCH:     runtime.GOARCH,
		NumCPU:     runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		TempDir:    filepath.Dir(tmp),
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	return m
}

// ioBoundCallers is the most callers at which a durable cell is bound by
// the disk rather than the processors (see durableSample).
const ioBoundCallers = 16

// durableSample is how many calls per worker a durable cell of ours
// times one of, given the memory cells' sample. Above ioBoundCallers the
// processors are saturated and a durable cell times the same share of
// calls as its memory twin: timing each call there cost durable
// throughput 6% (keys) to 10% (reserve) at 1024 callers, medians of 10
// alternating pairs, which the durable/memory ratio then charged to the
// log. At ioBoundCallers or fewer the callers wait on fsync with the
// processors mostly idle, so timing costs nothing, and a cell makes too
// few calls (~900 in 400 ms at one caller) for one in 16 to give a p99.
func durableSample(sample, callers int) int {
	if callers <= ioBoundCallers {
		return 1
	}
	return sample
}
