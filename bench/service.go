package main

// The -service run: ratelimitd, the Envoy rate limit service of
// cmd/ratelimitd, built from this repository and driven over gRPC, with
// the embedded file (durable) and in memory, and optionally a rate limit
// service already running elsewhere (-service-addr), such as
// envoyproxy/ratelimit, under the same load.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// serviceModule is the module of ratelimitd, built by the -service run.
const serviceModule = "github.com/seed7fbd42b6/ratelimit/cmd/ratelimitd"

// The load's domain and descriptor key; the rule limits each value of the
// key on its own.
const (
	serviceDomain = "bench"
	serviceKey    = "key"
)

// serviceConfig holds the -service flags.
type serviceConfig struct {
	on      bool
	addr    string // a running service to drive too
	label   string // its name in the results
	ref     string // -service-ref as given
	bin     string // a prebuilt ratelimitd, instead of building one
	dur     time.Duration
	warmup  time.Duration
	conns   int
	keys    int
	limit   int // requests per minute per key
	timeout time.Duration

	// refRate and refP99 are -service-ref parsed.
	refRate float64
	refP99  time.Duration
}

// addServiceFlags declares the -service flags on fs.
func addServiceFlags(fs *flag.FlagSet, s *serviceConfig) {
	fs.BoolVar(&s.on, "service", false, "measure ratelimitd (cmd/ratelimitd) over gRPC instead of the library: built with go build, started with the embedded file (durable) and in memory, driven with ShouldRateLimit at each -callers count (-runs, -mode, -v and -json apply)")
	fs.StringVar(&s.addr, "service-addr", "", "with -service, also drive the Envoy rate limit service (gRPC) already running at `host:port`, configured with the rule -v prints, round-robin with ratelimitd's durable runs")
	fs.StringVar(&s.label, "service-label", "external", "the name of -service-addr in the results (e.g. envoyproxy/ratelimit)")
	fs.StringVar(&s.ref, "service-ref", "", "with -service and no -service-addr, judge the targets against these `decisions/s,p99` of the reference service at 256 callers, measured elsewhere (e.g. 6816,135ms)")
	fs.StringVar(&s.bin, "service-bin", "", "with -service, run this ratelimitd `binary` instead of building one")
	fs.DurationVar(&s.dur, "service-d", 5*time.Second, "with -service, the measured duration of each run of each caller count")
	fs.DurationVar(&s.warmup, "service-warmup", time.Second, "with -service, the unmeasured load before each measured run")
	fs.IntVar(&s.conns, "service-conns", 4, "with -service, gRPC connections the callers share, round robin (as Envoy's do)")
	fs.IntVar(&s.keys, "service-keys", 100_000, "with -service, distinct descriptor values, drawn uniformly, one descriptor per request")
	fs.IntVar(&s.limit, "service-limit", 1_000_000, "with -service, the rule's requests per minute per value (the default denies nothing)")
	fs.DurationVar(&s.timeout, "service-timeout", 5*time.Second, "with -service, the deadline of each call (a call past it counts as an error)")
}

// check validates the -service flags once parsed.
func (s *serviceConfig) check() error {
	if !s.on {
		return nil
	}
	switch {
	case s.dur <= 0 || s.warmup < 0 || s.timeout <= 0:
		return errors.New("-service-d and -service-timeout must be > 0 and -service-warmup >= 0")
	case s.conns < 1 || s.keys < 1 || s.limit < 0:
		return errors.New("-service-conns and -service-keys must be >= 1 and -service-limit >= 0")
	case s.ref != "" && s.addr != "":
		return errors.New("-service-ref and -service-addr: give one (with -service-addr the reference is measured)")
	}
	if s.ref != "" {
		var err error
		if s.refRate, s.refP99, err = parseServiceRef(s.ref); err != nil {
			return fmt.Errorf("-service-ref: %w", err)
		}
	}
	return nil
}

// parseServiceRef parses "decisions/s,p99": "6816,135ms", "6.8k,135.5ms".
func parseServiceRef(s string) (float64, time.Duration, error) {
	rs, ps, ok := strings.Cut(s, ",")
	if !ok {
		return 0, 0, fmt.Errorf("want decisions/s,p99 (e.g. 6816,135ms), not %q", s)
	}
	rs = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rs), "/s"))
	mult := 1.0
	switch {
	case strings.HasSuffix(rs, "k"):
		mult, rs = 1e3, strings.TrimSuffix(rs, "k")
	case strings.HasSuffix(rs, "M"):
		mult, rs = 1e6, strings.TrimSuffix(rs, "M")
	}
	rate, err := strconv.ParseFloat(rs, 64)
	if err != nil || rate <= 0 {
		return 0, 0, fmt.Errorf("bad decisions/s in %q", s)
	}
	p99, err := time.ParseDuration(strings.TrimSpace(ps))
	if err != nil || p99 <= 0 {
		return 0, 0, fmt.Errorf("bad p99 in %q (want a duration such as 135ms)", s)
	}
	return rate * mult, p99, nil
}

// serviceRule is the configuration ratelimitd runs with (envoyproxy/
// ratelimit's YAML format, which a reference service needs too): one rule
// on the descriptor key, every value its own counter of perMinute
// requests a minute (fixed windows).
func serviceRule(perMinute int) string {
	return fmt.Sprintf(`# ratelimit bench -service: one rule on the key, every value its own counter.
domain: %s
descriptors:
  - key: %s
    rate_limit:
      unit: minute
      requests_per_unit: %d
`, serviceDomain, serviceKey, perMinute)
}

// serviceTarget is one service measured: ratelimitd in a mode, or the
// service at -service-addr.
type serviceTarget struct {
	label string
	mode  string // durable or memory for ratelimitd; "" for an external service
	data  string // ratelimitd's -data
	addr  string // set once it serves
}

// servicePhase is one ratelimitd process (nil start for none) and the
// services driven round-robin while it runs.
type servicePhase struct {
	ours    *serviceTarget // started for the phase, stopped after it
	targets []*serviceTarget
}

// servicePlan orders the work: one phase per ratelimitd mode selected
// (durable first), one process at a time, so the idle one never shares
// the machine with a measurement; an external service is driven in the
// first phase, round-robin with it, so that each of its runs has one of
// ratelimitd's measured seconds apart.
func servicePlan(modes []string, tmp, addr, label string) []servicePhase {
	var phases []servicePhase
	for _, m := range []string{"durable", "memory"} {
		if !slices.Contains(modes, m) {
			continue
		}
		t := &serviceTarget{label: "ratelimitd/" + m, mode: m}
		if m == "durable" {
			t.data = filepath.Join(tmp, "ratelimitd.db")
		}
		phases = append(phases, servicePhase{ours: t, targets: []*serviceTarget{t}})
	}
	if addr != "" {
		ext := &serviceTarget{label: label, addr: addr}
		if len(phases) == 0 {
			phases = append(phases, servicePhase{})
		}
		phases[0].targets = append(phases[0].targets, ext)
	}
	return phases
}

// runService is the -service run; it returns the exit status: 1 if any
// call failed, 2 if the run could not start.
func runService(cfg *config, stdout, stderr io.Writer) int {
	started := time.Now()
	sc := &cfg.svc
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	tmp, err := os.MkdirTemp(cfg.dir, "ratelimit-bench-service-")
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 2
	}
	defer os.RemoveAll(tmp)
	prog := newProgress(stderr)

	phases := servicePlan(cfg.modes, tmp, sc.addr, sc.label)
	if len(phases) == 0 {
		fmt.Fprintln(stderr, "bench: -service: -mode selects neither durable nor memory, and there is no -service-addr")
		return 2
	}
	rulePath := filepath.Join(tmp, "bench.yaml")
	if err := os.WriteFile(rulePath, []byte(serviceRule(sc.limit)), 0o644); err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 2
	}
	bin := sc.bin
	if bin == "" && phases[0].ours != nil {
		prog.update("building ratelimitd")
		if bin, err = buildService(ctx, tmp); err != nil {
			prog.note("bench: building ratelimitd: %v", err)
			return 2
		}
	}

	o := &serviceOutcome{cfg: cfg, started: started}
	values := serviceValues(sc.keys)
	total, done := 0, 0
	for _, ph := range phases {
		total += len(cfg.callers) * cfg.runs * len(ph.targets)
	}
	for _, ph := range phases {
		var proc *serviceProc
		if ph.ours != nil {
			prog.update("starting %s", ph.ours.label)
			proc, err = startService(ctx, bin, rulePath, ph.ours.data, filepath.Join(tmp, ph.ours.mode+".log"))
			if err != nil {
				prog.note("bench: starting %s: %v", ph.ours.label, err)
				return 2
			}
			ph.ours.addr = proc.addr
		}
		status := func() int {
			if proc != nil {
				defer func() {
					if err := proc.stop(); err != nil {
						prog.note("bench: stopping %s: %v", ph.ours.label, err)
					}
				}()
			}
			lg := make([]*loadClient, len(ph.targets))
			for i, t := range ph.targets {
				if lg[i], err = newLoadClient(ctx, t.addr, sc, values); err != nil {
					prog.note("bench: %s at %s: %v", t.label, t.addr, err)
					return 2
				}
				defer lg[i].close()
			}
			for _, n := range cfg.callers {
				per := make([][]serviceRun, len(ph.targets))
				for r := range cfg.runs {
					for j := range ph.targets {
						// Each run starts one service further along, so that
						// none always follows the same one (a durable cell
						// whose writes the disk is still flushing).
						i := (j + r) % len(ph.targets)
						t := ph.targets[i]
						done++
						of := ""
						if cfg.runs > 1 {
							of = fmt.Sprintf(", run %d/%d", r+1, cfg.runs)
						}
						prog.update("[%d/%d %3.0fs] %s, %d callers%s", done, total, time.Since(started).Seconds(), t.label, n, of)
						pid := 0
						if t == ph.ours {
							pid = proc.cmd.Process.Pid
						}
						run := lg[i].run(ctx, n, sc.warmup, sc.dur, cfg.seed+uint64(r)*1000003+uint64(n), pid)
						if ctx.Err() != nil {
							return 130
						}
						if run.Errors > 0 {
							o.failures = append(o.failures, fmt.Sprintf("%s, %d callers: %d errors, the first: %s", t.label, n, run.Errors, run.FirstError))
							prog.note("bench: FAIL %s", o.failures[len(o.failures)-1])
						}
						per[i] = append(per[i], run)
					}
				}
				for i, t := range ph.targets {
					o.results = append(o.results, combineServiceRuns(t.label, t.mode, t.addr, n, per[i]))
				}
			}
			return 0
		}()
		if status != 0 {
			if status == 130 {
				prog.note("\nbench: interrupted; removed %s", tmp)
			}
			return status
		}
	}
	prog.clear()
	o.targets = evalServiceTargets(serviceTargets, o.results, sc)
	for _, ph := range phases {
		for _, t := range ph.targets {
			o.labels = append(o.labels, t.label)
		}
	}
	printServiceSummary(stdout, o)
	if cfg.verbose {
		printServiceDetails(stdout, o)
	}
	status := 0
	if len(o.failures) > 0 {
		status = 1
	}
	if cfg.jsonPath != "" {
		if err := writeServiceJSON(cfg.jsonPath, o, describeMachine(tmp)); err != nil {
			prog.note("bench: writing JSON: %v", err)
			status = max(status, 1)
		}
	}
	prog.note("bench: %d service runs in %.1fs", total, time.Since(started).Seconds())
	return status
}

// serviceSourceDir finds cmd/ratelimitd's directory: through the go
// command (the workspace of the current directory), else next to this
// file's source.
func serviceSourceDir(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", serviceModule).Output()
	if dir := strings.TrimSpace(string(out)); err == nil && dir != "" {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
	}
	if _, file, _, ok := runtime.Caller(0); ok {
		dir := filepath.Join(filepath.Dir(file), "..", "cmd", "ratelimitd")
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
	}
	return "", fmt.Errorf("cannot find %s: run from the repository root, or give -service-bin", serviceModule)
}

// buildService builds ratelimitd into dir and returns the binary's path.
func buildService(ctx context.Context, dir string) (string, error) {
	src, err := serviceSourceDir(ctx)
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "ratelimitd")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	cmd.Dir = src
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build in %s: %v\n%s", src, err, out)
	}
	return bin, nil
}

// serviceProc is a running ratelimitd.
type serviceProc struct {
	cmd     *exec.Cmd
	addr    string
	logPath string
	exited  chan struct{}
	err     error // of Wait, once exited is closed
}

// freeLoopbackAddr returns a loopback address with a port free a moment
// ago.
func freeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// startService starts bin serving rulePath with -data data (durable, or
// "" for memory) on a free loopback port, its log going to logPath, and
// returns once gRPC health reports SERVING.
func startService(ctx context.Context, bin, rulePath, data, logPath string) (*serviceProc, error) {
	addr, err := freeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, "serve", "-config", rulePath, "-data", data, "-grpc-addr", addr,
		"-http-addr", "", "-watch-interval", "0", "-log-level", "warn")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &serviceProc{cmd: cmd, addr: addr, logPath: logPath, exited: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.exited) }()
	if err := waitServing(ctx, addr, p.exited, 60*time.Second); err != nil {
		p.stop()
		return nil, fmt.Errorf("%v; its log:\n%s", err, p.logTail())
	}
	return p, nil
}

// waitServing polls gRPC health at addr until it reports SERVING, the
// process exits or the time is up.
func waitServing(ctx context.Context, addr string, exited <-chan struct{}, within time.Duration) error {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer cc.Close()
	hc := healthpb.NewHealthClient(cc)
	deadline := time.Now().Add(within)
	last := "no answer"
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		resp, err := hc.Check(cctx, &healthpb.HealthCheckRequest{})
		cancel()
		if err == nil && resp.Status == healthpb.HealthCheckResponse_SERVING {
			return nil
		}
		if err != nil {
			last = err.Error()
		} else {
			last = resp.Status.String()
		}
		select {
		case <-exited:
			return errors.New("ratelimitd exited before serving")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("gRPC health at %s not SERVING after %v: %s", addr, within, last)
		}
	}
}

// stop sends SIGTERM (ratelimitd drains and closes its file), and kills
// the process if it has not exited after 30s.
func (p *serviceProc) stop() error {
	select {
	case <-p.exited:
		return p.err
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return p.err
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		<-p.exited
		return errors.New("killed after not exiting 30s after SIGTERM")
	}
}

// logTail is the end of the process's log.
func (p *serviceProc) logTail() string {
	b, _ := os.ReadFile(p.logPath)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}
