package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// impl is one limiter under test, opened empty for every cell and closed
// after it. Errors are failures of the implementation; a denial is
// (false, nil). Each worker calls it from its own goroutine, so it must be
// safe for concurrent use.
type impl interface {
	limit(d *limitDef, key string, reserve bool) (bool, error)
	// limitAll grants one token of a[ka] and one of b[kb], or neither.
	limitAll(a *limitDef, ka string, b *limitDef, kb string) (bool, error)
	// limitMany decides len(keys) requests of one token each
	// independently, setting ok[i]; it reports errors with w.fail and
	// may keep per-worker buffers in w.scratch.
	limitMany(w *worker, d *limitDef, keys []string, ok []bool)
	close() error
}

// logged is an implementation with a group-committed log (ours in durable
// mode): its commits, the records they carried and the time they took,
// since it opened. Its cells report group-commit figures and how close
// they came to the disk's limit.
type logged interface {
	logTotals() logTotals
}

type logTotals struct {
	commits, records uint64
	time             time.Duration
}

// minus returns the totals accumulated between b and t.
func (t logTotals) minus(b logTotals) logTotals {
	return logTotals{commits: t.commits - b.commits, records: t.records - b.records, time: t.time - b.time}
}

// implementation is one limiter the harness can measure. Each lives in its
// own file, which registers it from init with register; a file may also
// declare its own flags there (package flag), and use runs to stay out of
// a run that lacks what it needs (a server address, say).
type implementation struct {
	// name is "ours" for this library; any other name is a baseline,
	// selected with -baselines and compared with ours by name.
	name string
	// mode is where the state lives: "memory", or "durable" when every
	// grant is on disk before the caller hears it. -mode selects by it.
	mode string
	// about is one line for -h.
	about string
	// open returns a new, empty limiter that knows every limit in e.defs.
	open func(e *cellEnv) (impl, error)
	// runs reports whether the implementation runs scenario sc; nil
	// means every scenario.
	runs func(sc *scenario) bool
	// variants makes it run each of a scenario's variants (the hot limit
	// sharded and unsharded); otherwise it runs the scenario's first
	// configuration only.
	variants bool
	// slow marks an implementation that takes milliseconds a decision:
	// its cells last -naive-d and time every call.
	slow bool
	// remote marks an implementation whose state lives on a server it
	// reaches over the network (mode "redis"): its cells time every call,
	// are compared only with cells of their own mode, and the summary
	// shows them in a table of their own.
	remote bool
	// skip, if set, says why the implementation cannot run at all in this
	// run (no server to run on, say), or "": its cells are left out and
	// the reason printed on stderr, once for every implementation that
	// gives the same one.
	skip func() string
}

// cellEnv is what an implementation is opened with, once per cell.
type cellEnv struct {
	cfg     *config
	defs    []*limitDef // every limit the scenario uses
	dir     string      // an empty directory for the cell's files, removed after close
	callers int         // the cell's concurrent callers
	run     *runEnv
}

// runEnv is what the cells of one run share: a temporary directory and
// the resources implementations start once per run (a server), each
// stopped when the run ends.
type runEnv struct {
	dir   string                           // removed at the end of the run
	note  func(format string, args ...any) // a line on stderr
	res   map[string]*runResource
	stops []func()
}

type runResource struct {
	v   any
	err error
}

// resource returns the run's resource named name, starting it with start
// on first use; start's stop function runs when the run ends. A start that
// failed is not retried: every later call gets its error.
func (r *runEnv) resource(name string, start func() (v any, stop func(), err error)) (any, error) {
	if x, ok := r.res[name]; ok {
		return x.v, x.err
	}
	v, stop, err := start()
	if r.res == nil {
		r.res = map[string]*runResource{}
	}
	r.res[name] = &runResource{v, err}
	if stop != nil {
		r.stops = append(r.stops, stop)
	}
	return v, err
}

// close stops the run's resources, the last started first.
func (r *runEnv) close() {
	for i := len(r.stops) - 1; i >= 0; i-- {
		r.stops[i]()
	}
	r.stops, r.res = nil, nil
}

// comparable reports whether cells in modes a and b are compared (ours'
// against a baseline): in the same mode always; across modes only between
// implementations in this process (memory and durable), so a limiter on a
// server is compared with a baseline on the same server, never with an
// in-memory map.
func comparable(a, b string) bool {
	return a == b || (!remoteMode(a) && !remoteMode(b))
}

// remoteMode reports whether mode is a registered remote implementation's.
func remoteMode(mode string) bool {
	for _, im := range registry {
		if im.mode == mode && im.remote {
			return true
		}
	}
	return false
}

func (im *implementation) ours() bool { return im.name == "ours" }

// label names the implementation's cells: name/mode.
func (im *implementation) label() string { return im.name + "/" + im.mode }

// registry holds every registered implementation in registration order.
var registry []*implementation

// register adds im to the registry; it panics on a duplicate label or a
// missing field, so a bad registration fails every run and test.
func register(im *implementation) {
	if im.name == "" || im.mode == "" || im.open == nil {
		panic("bench: register: an implementation needs a name, a mode and open")
	}
	for _, o := range registry {
		if o.label() == im.label() || (!im.ours() && o.name == im.name) {
			panic(fmt.Sprintf("bench: register: %s registered twice", im.label()))
		}
	}
	registry = append(registry, im)
}

// ordered returns the registry in table order: ours first, then the
// baselines by mode in the order of ours' modes (memory, then durable),
// each group in registration order.
func ordered() []*implementation {
	var modes []string
	for _, im := range registry {
		if im.ours() {
			modes = append(modes, im.mode)
		}
	}
	rank := func(im *implementation) int {
		if im.ours() {
			return -1
		}
		if i := slices.Index(modes, im.mode); i >= 0 {
			return i
		}
		return len(modes)
	}
	out := slices.Clone(registry)
	slices.SortStableFunc(out, func(a, b *implementation) int { return rank(a) - rank(b) })
	return out
}

// baselineNames lists the registered baselines.
func baselineNames() []string {
	var names []string
	for _, im := range ordered() {
		if !im.ours() {
			names = append(names, im.name)
		}
	}
	return names
}

// modeNames lists the registered modes, each once.
func modeNames() []string {
	var names []string
	for _, im := range ordered() {
		if !slices.Contains(names, im.mode) {
			names = append(names, im.mode)
		}
	}
	return names
}

// selectImpls returns, in table order, the registered implementations
// whose mode is in modes: ours, and the baselines named in baselines.
func selectImpls(modes, baselines []string) []*implementation {
	var out []*implementation
	for _, im := range ordered() {
		if slices.Contains(modes, im.mode) && (im.ours() || slices.Contains(baselines, im.name)) {
			out = append(out, im)
		}
	}
	return out
}

// parseList splits a comma-separated flag value into names, each of which
// must be in have; "all" stands for every one of them.
func parseList(flagName, value string, have []string) ([]string, error) {
	if strings.TrimSpace(value) == "all" {
		return slices.Clone(have), nil
	}
	var out []string
	for _, s := range strings.Split(value, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !slices.Contains(have, s) {
			return nil, fmt.Errorf("-%s: unknown %q (have %s, or all)", flagName, s, strings.Join(have, ", "))
		}
		out = append(out, s)
	}
	return out, nil
}
