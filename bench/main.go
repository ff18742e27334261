// Command bench measures the ratelimit library, in memory, durable and on
// Redis, against what a Go programmer would otherwise use: a map of
// golang.org/x/time/rate limiters behind striped mutexes, the same behind
// one mutex, a naive durable limiter (one fsynced bbolt transaction per
// decision) and go-redis/redis_rate on the same Redis server (started by
// the harness when redis-server is on the PATH). With -service it drives
// ratelimitd over gRPC instead, beside another rate limit service if one
// is given (-service-addr). Every scenario runs at several caller counts; each (scenario,
// callers) group runs every implementation back to back, so ratios compare
// cells measured seconds apart.
//
// Run it with `go run ./bench` from the repository root; `-h` lists the
// flags and bench/README.md explains the output. Implementations register
// themselves (registry.go), one file each.
package main

import (
	"flag"
	"fmt"
	"io"
	"math"
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
)

// config is the parsed command line.
type config struct {
	dur         time.Duration
	naiveDur    time.Duration
	callers     []int
	nkeys       int
	scenarios   []string // names, in run order
	modes       []string
	baselines   []string
	verbose     bool
	jsonPath    string
	chartPath   string
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
	svc         serviceConfig // -service and its flags (service.go)

	wl      *workload
	targets []target // the targets judged: targets, unless a test sets others
}

const streamLen = 1 << 22 // precomputed Zipf key indices (16 MiB)

// parseFlags parses args (without the program name) into a config.
func parseFlags(fs *flag.FlagSet, args []string) (*config, error) {
	c := &config{targets: targets}
	fs.DurationVar(&c.dur, "d", 400*time.Millisecond, "measured duration of each cell (one scenario x implementation x caller count)")
	fs.DurationVar(&c.naiveDur, "naive-d", 200*time.Millisecond, "measured duration of each cell of a slow implementation (naive); callers still queued when it ends are drained and counted")
	callers := fs.String("callers", "1,16,256,1024", "comma-separated numbers of concurrent callers")
	fs.IntVar(&c.nkeys, "keys", 1_000_000, "distinct keys, built before measuring")
	scenarios := fs.String("scenario", "all", "comma-separated scenarios to run: "+strings.Join(scenarioNames(), ", ")+", or all")
	mode := fs.String("mode", "all", "comma-separated modes to run: "+strings.Join(modeNames(), ", ")+", or all (applies to ours and the baselines)")
	baselines := fs.String("baselines", "all", "comma-separated baselines: "+strings.Join(baselineNames(), ", ")+", all, or \"\" for none")
	fs.BoolVar(&c.verbose, "v", false, "after the summary, print every cell, the ratios, every target, CPU and group-commit figures")
	fs.StringVar(&c.jsonPath, "json", "", "also write every figure as JSON to `FILE`")
	fs.StringVar(&c.chartPath, "chart", "", "draw decisions/s against callers to `FILE` (.png or .svg)")
	fs.IntVar(&c.sample, "sample", 16, fmt.Sprintf("time every Nth call per worker (a clock read costs about as much as a baseline decision); cells outside memory mode with at most %d callers, Redis cells, slow implementations and limitmany time every call", ioBoundCallers))
	fs.IntVar(&c.runs, "runs", 1, "measure every cell this many times (round-robin within its scenario and caller count) and report medians")
	fs.IntVar(&c.batch, "batch", 64, "requests per LimitMany call")
	fs.IntVar(&c.partitions, "partitions", 0, "Options.Partitions of our limiter (0: library default)")
	fs.Int64Var(&c.preallocate, "log-preallocate", 0, "Options.LogPreallocate of our limiter in durable mode, in bytes (0: library default; -1: none)")
	fs.Float64Var(&c.zipfS, "zipf-s", 1.1, "Zipf exponent s (> 1) of key popularity: key of rank k is drawn with probability proportional to (v+k)^-s")
	fs.Float64Var(&c.zipfV, "zipf-v", 1, "Zipf offset v (>= 1)")
	fs.Float64Var(&c.keyRate, "key-rate", 2000, "per-key limit: tokens per second (keys, limitall, reserve, limitmany)")
	fs.Float64Var(&c.keyBurst, "key-burst", 200, "per-key limit: capacity; also MaxReserved in the reserve scenario")
	fs.Float64Var(&c.hotRate, "hot-rate", 500_000, "global limit: tokens per second, capacity a tenth of it (hot, limitall)")
	fs.StringVar(&c.dir, "dir", "", "parent of the temporary directory for bbolt files (default: the system temp dir); the directory is removed at exit")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the key stream")
	fs.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of the measured cells to `FILE` (read it with go tool pprof)")
	addServiceFlags(fs, &c.svc)
	fs.Usage = func() { usage(fs) }
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if err := c.svc.check(); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}

	for _, f := range strings.Split(*callers, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-callers: bad count %q", f)
		}
		if !slices.Contains(c.callers, n) { // a count given twice is one cell
			c.callers = append(c.callers, n)
		}
	}
	var err error
	if strings.TrimSpace(*scenarios) == "" {
		*scenarios = "all"
	}
	if c.scenarios, err = parseList("scenario", *scenarios, scenarioNames()); err != nil {
		return nil, err
	}
	if c.modes, err = parseList("mode", *mode, modeNames()); err != nil {
		return nil, err
	}
	if c.baselines, err = parseList("baselines", *baselines, baselineNames()); err != nil {
		return nil, err
	}
	switch ext := strings.ToLower(filepath.Ext(c.chartPath)); {
	case c.chartPath != "" && ext != ".png" && ext != ".svg":
		return nil, fmt.Errorf("-chart: want a .png or .svg file, not %q", c.chartPath)
	case len(c.scenarios) == 0 || len(c.modes) == 0:
		return nil, fmt.Errorf("-scenario and -mode must name at least one")
	case c.dur <= 0 || c.naiveDur <= 0:
		return nil, fmt.Errorf("-d and -naive-d must be > 0")
	case c.nkeys < 1 || c.nkeys > 1<<31:
		return nil, fmt.Errorf("-keys must be in [1, 2^31]")
	case c.sample < 1 || c.sample > 1<<20:
		return nil, fmt.Errorf("-sample must be in [1, 2^20]")
	case c.runs < 1:
		return nil, fmt.Errorf("-runs must be >= 1")
	case c.batch < 1:
		return nil, fmt.Errorf("-batch must be >= 1")
	case c.zipfS <= 1 || c.zipfV < 1:
		return nil, fmt.Errorf("-zipf-s must be > 1 and -zipf-v >= 1")
	case c.keyRate <= 0 || c.keyBurst < 1 || c.hotRate < 10:
		return nil, fmt.Errorf("-key-rate must be > 0, -key-burst >= 1 and -hot-rate >= 10")
	case c.keyBurst != math.Trunc(c.keyBurst) || c.hotRate/10 != math.Trunc(c.hotRate/10):
		// x/time/rate's burst is an int: the baselines would get a smaller bucket.
		return nil, fmt.Errorf("-key-burst and a tenth of -hot-rate (the capacities) must be whole numbers")
	}
	return c, nil
}

func usage(fs *flag.FlagSet) {
	out := fs.Output()
	fmt.Fprint(out, `Usage: go run ./bench [flags]

Measures the ratelimit library against baselines on the same workload in
the same run, and prints a short summary: decisions/s and p99 latency per
implementation at each scenario's headline caller count, the ratios that
matter, which speed targets were met, and the correctness check. -v adds
every cell; -json and -chart write every figure.

Implementations:
`)
	for _, im := range ordered() {
		fmt.Fprintf(out, "  %-16s %s\n", im.label(), im.about)
	}
	fmt.Fprint(out, "\nScenarios (each at every -callers count):\n")
	for _, e := range scenarioRegistry {
		fmt.Fprintf(out, "  %-10s %s\n", e.name, e.help)
	}
	fmt.Fprint(out, `
The admitted-token check verifies that no key or global limit was granted
more than capacity + rate x elapsed (+ MaxReserved). A failed check or an
error from an implementation makes the exit status 1; a missed speed
target does not. Bad flags make it 2.

Results go to stdout; progress (on a terminal) and failures to stderr.

Flags:
`)
	fs.PrintDefaults()
}

func main() {
	cfg, err := parseFlags(flag.CommandLine, os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	if cfg.svc.on {
		os.Exit(runService(cfg, os.Stdout, os.Stderr))
	}
	os.Exit(run(cfg, os.Stdout, os.Stderr))
}

// run measures what cfg selects, writes the results to stdout and
// progress and failures to stderr, and returns the exit status: 1 if any
// cell failed its admitted-token check or met an error, 2 if the run could
// not start, 0 otherwise.
func run(cfg *config, stdout, stderr io.Writer) int {
	started := time.Now()
	tmp, err := os.MkdirTemp(cfg.dir, "ratelimit-bench-")
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 2
	}
	defer os.RemoveAll(tmp)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer func() { signal.Stop(sig); close(sig) }()
	go func() {
		if _, ok := <-sig; ok {
			os.RemoveAll(tmp)
			fmt.Fprintln(stderr, "\nbench: interrupted; removed", tmp)
			os.Exit(130)
		}
	}()
	prog := newProgress(stderr)
	renv := &runEnv{dir: tmp, note: prog.note}
	defer renv.close() // before the directory is removed
	prog.update("building %s keys and the key stream", fmtCount(cfg.nkeys))
	if cfg.wl == nil {
		cfg.wl = buildWorkload(cfg.nkeys, cfg.zipfS, cfg.zipfV, streamLen, cfg.seed)
	}
	o := &outcome{
		cfg:       cfg,
		scenarios: selectScenarios(buildScenarios(cfg), cfg.scenarios),
		impls:     runnable(selectImpls(cfg.modes, cfg.baselines), prog.note),
	}

	if cfg.cpuProfile != "" {
		f, err := os.Create(cfg.cpuProfile)
		if err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return 2
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return 2
		}
		defer pprof.StopCPUProfile()
	}
	cells := plan(cfg, o.scenarios, o.impls, renv)
	if len(cells) == 0 {
		fmt.Fprintln(stderr, "bench: nothing to measure: every implementation selected was skipped (see above)")
		return 2
	}
	o.measure(cells, prog, started)

	var baselines []*implementation
	for _, im := range o.impls {
		if !im.ours() {
			baselines = append(baselines, im)
		}
	}
	computeRatios(o.results, baselines)
	computeDiskLimits(o.results)
	o.targets = evalTargets(cfg.targets, o.results)
	printSummary(stdout, o)
	if cfg.verbose {
		printDetails(stdout, o)
	}

	status := 0
	if len(o.failures) > 0 {
		status = 1
	}
	if cfg.jsonPath != "" {
		rep := &report{
			Started:  started,
			Seconds:  time.Since(started).Seconds(),
			Machine:  describeMachine(tmp),
			Settings: settings(cfg),
			Limits:   limitsOf(o.scenarios),
			Results:  o.results,
			Targets:  o.targets,
			OK:       status == 0,
		}
		if err := writeJSON(cfg.jsonPath, rep); err != nil {
			prog.note("bench: writing JSON: %v", err)
			status = max(status, 1)
		}
	}
	if cfg.chartPath != "" {
		if err := writeChart(cfg.chartPath, o); err != nil {
			prog.note("bench: drawing the chart: %v", err)
			status = max(status, 1)
		}
	}
	prog.note("bench: %d cells in %.1fs", len(cells)*cfg.runs, time.Since(started).Seconds())
	return status
}

// measure runs cells, which plan ordered, and appends their results to
// o.results: each (scenario, callers) group's cells round-robin, cfg.runs
// times, so that every run of ours has the other implementations measured
// right beside it. Each run of a group visits its cells in another order
// (runOrder), so that no cell always follows the same one (a durable cell
// leaves the disk writing back, say); the first run, which follows the
// previous group, starts at the group's first cell. Failures go to
// o.failures and, as they happen, stderr.
func (o *outcome) measure(cells []*cell, prog *progress, started time.Time) {
	cfg := o.cfg
	r := newRunner(cfg.wl, slices.Max(cfg.callers), cfg.batch)
	fail := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		o.failures = append(o.failures, msg)
		prog.note("bench: FAIL %s", msg)
	}
	done := 0
	for i := 0; i < len(cells); {
		j := i
		for j < len(cells) && cells[j].sc == cells[i].sc && cells[j].callers == cells[i].callers {
			j++
		}
		per := make([][]*result, j-i)
		group := cells[i:j]
		if i == 0 {
			o.warmUp(r, group, prog)
		}
		for n := range cfg.runs {
			for _, k := range runOrder(n, len(group)) {
				c := group[k]
				done++
				of := ""
				if cfg.runs > 1 {
					of = fmt.Sprintf(", run %d/%d", n+1, cfg.runs)
				}
				prog.update("[%d/%d %3.0fs] %s, %d callers, %s%s", done, len(cells)*cfg.runs,
					time.Since(started).Seconds(), c.sc.name, c.callers, c.label(), of)
				res, err := r.run(c, cfg.batch)
				if err != nil {
					fail("%s %s, %d callers: %v", c.sc.name, c.label(), c.callers, err)
					continue
				}
				per[k] = append(per[k], res)
				if !res.Check.OK {
					fail("%s %s, %d callers: admitted-token check: %s", res.Scenario, res.label(), res.Callers, res.Check.Detail)
				}
				if res.Errors > 0 {
					fail("%s %s, %d callers: %d errors, the first: %s", res.Scenario, res.label(), res.Callers, res.Errors, res.FirstError)
				}
			}
		}
		for _, runs := range per {
			if len(runs) > 0 {
				o.results = append(o.results, combine(runs))
			}
		}
		i = j
	}
	prog.clear()
}

// runOrder is the order in which run n visits a group of size cells: it
// starts at cell n (mod size) and steps through the group by a stride
// coprime with size, the strides taken in turn from run to run (a group of
// two has only one, and one of three, four or six two), so that the cell
// before each one changes from one run to the next.
func runOrder(n, size int) []int {
	var strides []int
	for s := 1; s < size; s++ {
		if gcd(s, size) == 1 {
			strides = append(strides, s)
		}
	}
	stride := 1
	if len(strides) > 0 {
		stride = strides[n%len(strides)]
	}
	order := make([]int, size)
	for m := range order {
		order[m] = (n + m*stride) % size
	}
	return order
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// warmUp runs the first group's cells once and discards the results: the
// first cells of a process pay for its cold start (the heap's first growth
// faults fresh pages in from the kernel, and the caches and branch
// predictors are cold), which would otherwise fall on whichever cell is
// measured first. A failure here shows again when the cell is measured.
func (o *outcome) warmUp(r *runner, group []*cell, prog *progress) {
	for _, c := range group {
		prog.update("warming up: %s, %d callers, %s", c.sc.name, c.callers, c.label())
		_, _ = r.run(c, o.cfg.batch)
	}
}

// runnable returns the implementations of impls that can run, and notes,
// once each, the reasons the others give (see implementation.skip).
func runnable(impls []*implementation, note func(format string, args ...any)) []*implementation {
	var out []*implementation
	var noted []string
	for _, im := range impls {
		why := ""
		if im.skip != nil {
			why = im.skip()
		}
		if why == "" {
			out = append(out, im)
		} else if !slices.Contains(noted, why) {
			noted = append(noted, why)
			note("%s", why)
		}
	}
	return out
}

// plan lists the cells in run order: by scenario, then caller count, then
// implementation (ours first) and variant, so that every ratio compares
// cells measured seconds apart. Each cell's files go to a directory of its
// own under renv.dir, removed when the cell closes.
func plan(cfg *config, scs []*scenario, impls []*implementation, renv *runEnv) []*cell {
	tmp := renv.dir
	var cells []*cell
	for _, sc := range scs {
		defs := sc.defs()
		for _, n := range cfg.callers {
			for _, im := range impls {
				if im.runs != nil && !im.runs(sc) {
					continue
				}
				variants := []*variant{nil}
				if im.variants && len(sc.variants) > 0 {
					variants = nil
					for i := range sc.variants {
						variants = append(variants, &sc.variants[i])
					}
				}
				for _, v := range variants {
					c := &cell{sc: sc, variant: v, impl: im.name, mode: im.mode, callers: n,
						dur: cfg.dur, sample: sampleEvery(cfg, im, sc, n)}
					if im.slow {
						c.dur = cfg.naiveDur
					}
					dir := filepath.Join(tmp, fmt.Sprintf("%03d-%s-%s-%s", len(cells), sc.name, im.name, im.mode))
					c.open = func() (impl, error) {
						if err := os.MkdirAll(dir, 0o700); err != nil {
							return nil, err
						}
						x, err := im.open(&cellEnv{cfg: cfg, defs: defs, dir: dir, callers: n, run: renv})
						if err != nil {
							os.RemoveAll(dir)
							return nil, err
						}
						return &dirImpl{impl: x, dir: dir}, nil
					}
					cells = append(cells, c)
				}
			}
		}
	}
	return cells
}

// limitsOf describes each scenario's limits, for the JSON.
func limitsOf(scs []*scenario) map[string]string {
	m := map[string]string{}
	for _, sc := range scs {
		m[sc.name] = sc.limitsText()
	}
	return m
}

// dirImpl removes a cell's directory when the implementation closes, so a
// long run does not fill the temp dir.
type dirImpl struct {
	impl
	dir string
}

func (d *dirImpl) close() error {
	err := d.impl.close()
	os.RemoveAll(d.dir)
	return err
}

// logTotals are the wrapped implementation's, if it has a log.
func (d *dirImpl) logTotals() logTotals {
	if lg, ok := d.impl.(logged); ok {
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
		"modes":           cfg.modes,
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

// ioBoundCallers is the most callers at which a cell outside memory mode
// is taken to be bound by its storage rather than the processors.
const ioBoundCallers = 16

// sampleEvery is how many calls per worker of cell (sc, im, callers) time
// one: every call where calls are few (limitmany, slow implementations) or
// the processors wait on storage or the network (outside memory mode at
// ioBoundCallers or fewer; remote implementations at any count), so there
// are enough samples for a p99 and timing costs no throughput; otherwise
// -sample, the same share for every implementation, so that timing costs
// them alike.
func sampleEvery(cfg *config, im *implementation, sc *scenario, callers int) int {
	if sc.batch || im.slow || im.remote || (im.mode != "memory" && callers <= ioBoundCallers) {
		return 1
	}
	return cfg.sample
}
