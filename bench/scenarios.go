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

// impl is one limiter under test: ours (memory or durable) or a baseline.
// Errors are failures of the implementation; a denial is (false, nil).
type impl interface {
	limit(d *limitDef, key string, reserve bool) (bool, error)
	limitAll(a *limitDef, ka string, b *limitDef, kb string) (bool, error)
	// limitMany decides len(keys) requests of one token each
	// independently, setting ok[i]; it reports errors with w.fail.
	limitMany(w *worker, d *limitDef, keys []string, ok []bool)
	close() error
}

// logged is an implementation with a group-committed log (ours in durable
// mode): its commits, the records they carried and the time they took,
// since it opened.
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

// scenario is one workload. call performs one call (one decision, or one
// batch for limitmany) on w's next keys and accounts the outcome in w.
type scenario struct {
	name     string
	about    string
	variants []variant // configurations of our limiter; baselines run once
	batch    bool      // one call decides batchSize requests
	perKey   *limitDef // limit whose grants are checked per key, if any
	global   *limitDef // limit whose grants are checked in total, if any
	call     func(im impl, w *worker, v *variant)
}

// variant is a configuration of the scenario; only the hot scenario has
// more than one (unsharded and sharded), and baselines use the first.
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

// scenarioNames lists the scenarios in run order.
var scenarioNames = []string{"keys", "hot", "limitall", "reserve", "limitmany"}

// buildScenarios returns the scenarios with limits from the flags.
func buildScenarios(cfg *config) []*scenario {
	user := &limitDef{name: "user", rate: cfg.keyRate, capacity: cfg.keyBurst}
	resv := &limitDef{name: "resv", rate: cfg.keyRate, capacity: cfg.keyBurst, maxReserved: cfg.keyBurst}
	hot := &limitDef{name: "global", rate: cfg.hotRate, capacity: cfg.hotRate / 10}
	hot16 := &limitDef{name: "global16", rate: cfg.hotRate, capacity: cfg.hotRate / 10, shards: 16}

	perKey := func(d *limitDef, reserve bool) func(im impl, w *worker, v *variant) {
		return func(im impl, w *worker, v *variant) {
			i := w.next()
			ok, err := im.limit(d, w.wl.keys[i], reserve)
			w.account(i, ok, err)
		}
	}
	return []*scenario{{
		name:   "keys",
		about:  fmt.Sprintf("Limit on %d distinct keys, Zipf-skewed", len(cfg.wl.keys)),
		perKey: user,
		call:   perKey(user, false),
	}, {
		name:     "hot",
		about:    "Limit on one global key, unsharded and with Shards: 16",
		global:   hot,
		variants: []variant{{name: "unsharded", global: hot}, {name: "shards16", global: hot16}},
		call: func(im impl, w *worker, v *variant) {
			ok, err := im.limit(v.global, globalKey, false)
			w.accountGlobal(ok, err)
		},
	}, {
		name:   "limitall",
		about:  "LimitAll of a per-user limit (Zipf keys) and one global limit",
		perKey: user,
		global: hot,
		call: func(im impl, w *worker, v *variant) {
			i := w.next()
			ok, err := im.limitAll(user, w.wl.keys[i], hot, globalKey)
			w.account(i, ok, err)
			if ok {
				w.globalGrants++
			}
		},
	}, {
		name:   "reserve",
		about:  "Limit with Reserve: true (debt up to MaxReserved), Zipf keys",
		perKey: resv,
		call:   perKey(resv, true),
	}, {
		name:   "limitmany",
		about:  fmt.Sprintf("LimitMany of %d independent requests per call, Zipf keys", cfg.batch),
		perKey: user,
		batch:  true,
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
	}}
}

// selectScenarios filters by the comma-separated names in filter ("" or
// "all" keeps every scenario).
func selectScenarios(all []*scenario, filter string) ([]*scenario, error) {
	if filter == "" || filter == "all" {
		return all, nil
	}
	var out []*scenario
	for _, name := range strings.Split(filter, ",") {
		name = strings.TrimSpace(name)
		found := false
		for _, s := range all {
			if s.name == name {
				out = append(out, s)
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("unknown scenario %q (have %s)", name, strings.Join(scenarioNames, ", "))
		}
	}
	return out, nil
}

func validScenarios(filter string) bool {
	if filter == "" || filter == "all" {
		return true
	}
	for _, name := range strings.Split(filter, ",") {
		if !slices.Contains(scenarioNames, strings.TrimSpace(name)) {
			return false
		}
	}
	return true
}

// buildWorkload builds n distinct 20-byte keys ("user:000000000000042")
// in one backing array, so the garbage collector sees one object, and a
// stream of streamLen key indices drawn from Zipf(s, v) over the keys (rank
// r is key r: the hash-based placement of every implementation spreads
// them). The stream is generated in parallel chunks, each by its own
// generator seeded from seed, so generating it costs ~0.1 s once and
// nothing during the measurement.
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
