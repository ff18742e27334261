package main

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
	"unsafe"
)

// limitDef is one limit as the harness sees it: a token bucket of rate
// tokens per second holding up to capacity, optionally sharded, optionally
// allowing maxReserved tokens of reservation debt. Every implementation is
// configured from it.
type limitDef struct {
	name        string
	rate        float64 // tokens per second
	capacity    float64
	maxReserved float64
	shards      int
}

// maxWait is the longest wait a reservation may be given: the time to repay
// maxReserved tokens of debt.
func (d *limitDef) maxWait() time.Duration {
	return time.Duration(d.maxReserved / d.rate * 1e9)
}

// allowed is the most tokens the limit may grant to one key in elapsed: a
// full bucket, the refill, and the permitted debt.
func (d *limitDef) allowed(elapsed time.Duration) float64 {
	return d.capacity + d.rate*elapsed.Seconds() + d.maxReserved
}

func (d *limitDef) String() string {
	s := fmt.Sprintf("%s: token bucket %g/s, capacity %g", d.name, d.rate, d.capacity)
	if d.maxReserved > 0 {
		s += fmt.Sprintf(", maxReserved %g", d.maxReserved)
	}
	if d.shards > 1 {
		s += fmt.Sprintf(", shards %d", d.shards)
	}
	return s
}

// scenario is one workload. call performs one call (one decision, or one
// batch for limitmany) on w's next keys and accounts the outcome in w.
type scenario struct {
	name     string
	about    string // one line
	short    string // a few words, for the chart's panel title
	headline int    // the caller count the summary shows (the nearest run at or below it)
	// neverDenies marks a limit no implementation reaches (hotgrants): the
	// summary leaves the scenario to the details, and the admitted-token
	// check holds for any implementation, even one that grants everything.
	neverDenies bool
	variants    []variant // configurations of the limit, for implementations that run variants
	batch       bool      // one call decides -batch requests
	perKey      *limitDef // limit whose grants are checked per key, if any
	global      *limitDef // limit whose grants are checked in total, if any
	call        func(im impl, w *worker, v *variant)
}

// variant is a configuration of the scenario; only the one-key scenarios
// (hot, hotgrants) have more than one (unsharded and sharded).
// Implementations that do not run variants run the scenario's global
// limit, the first variant's.
type variant struct {
	name   string
	global *limitDef // overrides scenario.global
}

// workload is the data every scenario draws from: the keys, and a
// precomputed Zipf-distributed stream of key indices.
type workload struct {
	keys   []string
	stream []uint32 // key indices, Zipf distributed
	mask   uint32   // len(stream)-1
}

const globalKey = "all"

// scenarioRegistry lists the scenarios in run order: a name, a line for
// -h, and a builder that makes the scenario from the command line.
var scenarioRegistry = []struct {
	name, help string
	build      func(cfg *config) *scenario
}{
	{"keys", "Limit on -keys distinct keys, Zipf-skewed", keysScenario},
	{"hot", "Limit on one global key: unsharded, and with Shards: 16 (ours only)", hotScenario},
	{"hotgrants", "the hot scenario with a limit it never reaches: every decision a grant", hotGrantsScenario},
	{"limitall", "LimitAll of a per-user limit and a global limit", limitAllScenario},
	{"reserve", "Limit with Reserve: true, debt up to MaxReserved", reserveScenario},
	{"limitmany", "LimitMany of -batch independent requests a call (baselines: one by one)", limitManyScenario},
}

// scenarioNames lists the registered scenarios in run order.
func scenarioNames() []string {
	var names []string
	for _, e := range scenarioRegistry {
		names = append(names, e.name)
	}
	return names
}

// buildScenarios returns every registered scenario, with limits from cfg.
func buildScenarios(cfg *config) []*scenario {
	var out []*scenario
	for _, e := range scenarioRegistry {
		sc := e.build(cfg)
		sc.name = e.name
		out = append(out, sc)
	}
	return out
}

// userLimit is the per-key limit of the keys, limitall and limitmany
// scenarios.
func userLimit(cfg *config) *limitDef {
	return &limitDef{name: "user", rate: cfg.keyRate, capacity: cfg.keyBurst}
}

// hotLimit is the one global limit of the hot and limitall scenarios.
func hotLimit(cfg *config, name string, shards int) *limitDef {
	return &limitDef{name: name, rate: cfg.hotRate, capacity: cfg.hotRate / 10, shards: shards}
}

// perKeyCall is a call of Limit on the worker's next key.
func perKeyCall(d *limitDef, reserve bool) func(im impl, w *worker, v *variant) {
	return func(im impl, w *worker, v *variant) {
		i := w.next()
		ok, err := im.limit(d, w.wl.keys[i], reserve)
		w.account(i, ok, err)
	}
}

func keysScenario(cfg *config) *scenario {
	user := userLimit(cfg)
	return &scenario{
		about:    fmt.Sprintf("Limit on %s distinct keys, Zipf-skewed", fmtCount(len(cfg.wl.keys))),
		short:    "Limit, Zipf keys",
		headline: 1024,
		perKey:   user,
		call:     perKeyCall(user, false),
	}
}

func hotScenario(cfg *config) *scenario {
	return oneKeyScenario(hotLimit(cfg, "global", 0), hotLimit(cfg, "global16", 16),
		"Limit on one global key, unsharded and with Shards: 16", "Limit, one key")
}

// ampleRate is the hotgrants scenario's limit, in tokens per second (its
// capacity a tenth of it): far beyond what any implementation decides in
// a second, whatever -hot-rate is, so that it never denies.
const ampleRate = 5e8

// hotGrantsScenario is the hot scenario on a limit of ampleRate, never
// reached: every decision is a grant, the load that Shards spreads over
// partitions. (At the hot limit most decisions are denials, which an
// unsharded key makes without a lock.)
func hotGrantsScenario(cfg *config) *scenario {
	grants := func(name string, shards int) *limitDef {
		return &limitDef{name: name, rate: ampleRate, capacity: ampleRate / 10, shards: shards}
	}
	sc := oneKeyScenario(grants("ample", 0), grants("ample16", 16),
		"Limit on one global key that never runs out, unsharded and with Shards: 16", "Limit, one key, all granted")
	sc.neverDenies = true
	return sc
}

// oneKeyScenario calls Limit on one key of a global limit: unsharded
// (and for implementations that run no variants), or sharded.
func oneKeyScenario(unsharded, sharded *limitDef, about, short string) *scenario {
	return &scenario{
		about:    about,
		short:    short,
		headline: 1024,
		global:   unsharded,
		variants: []variant{{name: "unsharded", global: unsharded}, {name: "shards16", global: sharded}},
		call: func(im impl, w *worker, v *variant) {
			ok, err := im.limit(v.global, globalKey, false)
			w.accountGlobal(ok, err)
		},
	}
}

func limitAllScenario(cfg *config) *scenario {
	user, hot := userLimit(cfg), hotLimit(cfg, "global", 0)
	return &scenario{
		about:    "LimitAll of a per-user limit (Zipf keys) and one global limit",
		short:    "LimitAll, key and global",
		headline: 1024,
		perKey:   user,
		global:   hot,
		call: func(im impl, w *worker, v *variant) {
			i := w.next()
			ok, err := im.limitAll(user, w.wl.keys[i], hot, globalKey)
			w.account(i, ok, err)
			if ok {
				w.globalGrants++
			}
		},
	}
}

func reserveScenario(cfg *config) *scenario {
	resv := &limitDef{name: "resv", rate: cfg.keyRate, capacity: cfg.keyBurst, maxReserved: cfg.keyBurst}
	return &scenario{
		about:    "Limit with Reserve: true (debt up to MaxReserved), Zipf keys",
		short:    "Limit with Reserve",
		headline: 1024,
		perKey:   resv,
		call:     perKeyCall(resv, true),
	}
}

func limitManyScenario(cfg *config) *scenario {
	user := userLimit(cfg)
	return &scenario{
		about:    fmt.Sprintf("LimitMany of %d independent requests per call, Zipf keys", cfg.batch),
		short:    fmt.Sprintf("LimitMany, %d a call", cfg.batch),
		headline: 1024,
		perKey:   user,
		batch:    true,
		call: func(im impl, w *worker, v *variant) {
			for j := range w.batchKeys {
				i := w.next()
				w.batchIdx[j] = i
				w.batchKeys[j] = w.wl.keys[i]
			}
			im.limitMany(w, user, w.batchKeys, w.batchOK)
			for j, ok := range w.batchOK {
				w.account(w.batchIdx[j], ok, nil)
			}
		},
	}
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

// limitsText describes the scenario's limits in one line.
func (sc *scenario) limitsText() string {
	var parts []string
	for _, d := range sc.defs() {
		parts = append(parts, d.String())
	}
	return strings.Join(parts, "; ")
}

// selectScenarios returns the scenarios of all named in names, in run
// order.
func selectScenarios(all []*scenario, names []string) []*scenario {
	var out []*scenario
	for _, sc := range all {
		if slices.Contains(names, sc.name) {
			out = append(out, sc)
		}
	}
	return out
}

// buildWorkload builds n distinct 20-byte keys ("user:000000000000042")
// in one backing array, so the garbage collector sees one object, and a
// stream of streamLen key indices drawn from Zipf(s, v) over the keys (rank
// r is key r: the hash-based placement of every implementation spreads
// them). The stream is generated in parallel chunks, each by its own
// generator seeded from seed, so drawing a key costs one load during the
// measurement.
func buildWorkload(n int, s, v float64, streamLen int, seed uint64) *workload {
	const width = 20
	buf := make([]byte, n*width)
	keys := make([]string, n)
	for i := range n {
		b := buf[i*width : (i+1)*width]
		copy(b, "user:")
		x := i
		for j := width - 1; j >= 5; j-- {
			b[j] = byte('0' + x%10)
			x /= 10
		}
		keys[i] = unsafe.String(&b[0], width)
	}
	stream := make([]uint32, streamLen)
	const chunk = 1 << 16
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for off := 0; off < streamLen; off += chunk {
		wg.Add(1)
		sem <- struct{}{}
		go func(off int) {
			defer func() { <-sem; wg.Done() }()
			r := rand.New(rand.NewPCG(seed, uint64(off)))
			z := rand.NewZipf(r, s, v, uint64(n-1))
			for i := off; i < min(off+chunk, streamLen); i++ {
				stream[i] = uint32(z.Uint64())
			}
		}(off)
	}
	wg.Wait()
	return &workload{keys: keys, stream: stream, mask: uint32(streamLen - 1)}
}

// startPos is where worker id starts reading the stream: spread over the
// stream, and the same in every cell, so every implementation sees the same
// requests per worker.
func (wl *workload) startPos(id int) uint32 {
	return uint32(id) * 0x9E3779B1 & wl.mask
}
