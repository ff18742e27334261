package main

// The harness measured against itself (its helpers start with hb): the
// admitted-token check catches over-granting, the baselines are configured
// like our token bucket, and our memory-mode calls allocate nothing on warm
// keys.

import (
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/seed7fbd42b6/ratelimit"
	"golang.org/x/time/rate"
)

// hbCfg is a small config for tests.
func hbCfg(t *testing.T, nkeys int) *config {
	cfg := &config{dur: 100 * time.Millisecond, naiveDur: 50 * time.Millisecond, callers: []int{1}, nkeys: nkeys,
		scenarios: scenarioNames(), modes: modeNames(), baselines: baselineNames(), sample: 16, runs: 1,
		batch: 64, zipfS: 1.1, zipfV: 1, keyRate: 2000, keyBurst: 200, hotRate: 500_000, seed: 1,
		preallocate: -1, targets: targets}
	cfg.wl = buildWorkload(cfg.nkeys, cfg.zipfS, cfg.zipfV, 1<<16, cfg.seed)
	return cfg
}

func hbScenario(t *testing.T, scs []*scenario, name string) *scenario {
	for _, s := range scs {
		if s.name == name {
			return s
		}
	}
	t.Fatalf("no scenario %q", name)
	return nil
}

// hbFake is an implementation for check tests: a per-(def,key) token
// bucket whose rate is rateMul times the configured one (1: honest), or one
// that grants everything (grantAll).
type hbFake struct {
	mu       sync.Mutex
	rateMul  float64
	grantAll bool
	b        map[mapKey]*rate.Limiter
}

func (f *hbFake) get(d *limitDef, key string) *rate.Limiter {
	k := mapKey{d, key}
	l := f.b[k]
	if l == nil {
		l = rate.NewLimiter(rate.Limit(d.rate*f.rateMul), int(d.capacity))
		f.b[k] = l
	}
	return l
}

func (f *hbFake) limit(d *limitDef, key string, reserve bool) (bool, error) {
	if f.grantAll {
		return true, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if d.shards > 1 {
		key += "#shardless"
	}
	return f.get(d, key).Allow(), nil
}

func (f *hbFake) limitAll(a *limitDef, ka string, b *limitDef, kb string) (bool, error) {
	if f.grantAll {
		return true, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	la, lb := f.get(a, ka), f.get(b, kb)
	now := time.Now()
	if la.TokensAt(now) >= 1 && lb.TokensAt(now) >= 1 {
		la.AllowN(now, 1)
		lb.AllowN(now, 1)
		return true, nil
	}
	return false, nil
}

func (f *hbFake) limitMany(w *worker, d *limitDef, keys []string, ok []bool) {
	for i, k := range keys {
		ok[i], _ = f.limit(d, k, false)
	}
}

func (f *hbFake) close() error { return nil }

func hbRun(t *testing.T, cfg *config, sc *scenario, v *variant, callers int, dur, openDelay time.Duration, mk func() impl) *result {
	return hbRunOn(t, newRunner(cfg.wl, callers, cfg.batch), cfg, sc, v, callers, dur, openDelay, mk)
}

func hbRunOn(t *testing.T, r *runner, cfg *config, sc *scenario, v *variant, callers int, dur, openDelay time.Duration, mk func() impl) *result {
	c := &cell{sc: sc, variant: v, impl: "fake", mode: "memory", callers: callers, dur: dur, sample: 16,
		open: func() (impl, error) { time.Sleep(openDelay); return mk(), nil }}
	res, err := r.run(c, cfg.batch)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// The check is not vacuous: an implementation that grants every request
// fails it in every scenario whose limit can be reached.
func TestCheckCatchesGrantAll(t *testing.T) {
	cfg := hbCfg(t, 10_000)
	scs := buildScenarios(cfg)
	for _, sc := range scs {
		if sc.neverDenies {
			continue
		}
		var v *variant
		if len(sc.variants) > 0 {
			v = &sc.variants[1]
		}
		res := hbRun(t, cfg, sc, v, 4, 50*time.Millisecond, 0, func() impl { return &hbFake{grantAll: true, b: map[mapKey]*rate.Limiter{}} })
		if res.Check.OK {
			t.Errorf("%s: grant-all implementation passed the check (max fraction %.2f)", sc.name, res.Check.MaxFraction)
		} else {
			t.Logf("%s: grant-all fails as it should (max fraction %.1f)", sc.name, res.Check.MaxFraction)
		}
	}
}

// The check says whether it was exercised: whether the hottest key, or
// the global limit, was asked for more than its allowance, the only way
// an implementation that grants everything could fail it.
func TestCheckSaysWhetherExercised(t *testing.T) {
	cfg := hbCfg(t, 10_000)
	scs := buildScenarios(cfg)
	keys, hot := hbScenario(t, scs, "keys"), hbScenario(t, scs, "hot")
	r := newRunner(cfg.wl, 4, cfg.batch)
	ws := r.workers
	read := func(n uint32, calls int64) { // each worker read n stream positions in calls calls
		for _, w := range ws {
			w.reset(cfg.batch)
			w.pos += n
			w.calls = calls
		}
	}
	want := int64(0)
	for _, w := range ws {
		for p := cfg.wl.startPos(w.id); p != cfg.wl.startPos(w.id)+100; p++ {
			if cfg.wl.stream[p&cfg.wl.mask] == hottestKey {
				want++
			}
		}
	}
	read(100, 100)
	if got := r.demand(ws, hottestKey); got != want {
		t.Fatalf("demand of the hottest key over 4 x 100 positions = %d, want %d", got, want)
	}
	for _, c := range []struct {
		name      string
		sc        *scenario
		positions uint32
		calls     int64
		exercised bool
	}{
		// keys: capacity 200 + 2000/s over 1 s.
		{"keys, a few requests", keys, 100, 100, false},
		{"keys, the whole stream read by 4 callers", keys, uint32(len(cfg.wl.stream)), int64(len(cfg.wl.stream)), true},
		// hot: 500,000/s.
		{"hot, 4 x 1000 calls", hot, 0, 1000, false},
		{"hot, 4 x 200,000 calls", hot, 0, 200_000, true},
	} {
		read(c.positions, c.calls)
		v := &variant{global: c.sc.global}
		ch := r.check(&cell{sc: c.sc}, v, ws, time.Second)
		if !ch.OK || ch.Exercised != c.exercised {
			t.Errorf("%s: %+v, want ok and exercised %v", c.name, ch, c.exercised)
		}
	}
}

// An implementation that refills 30% too fast is caught even when its Open
// takes 160 ms, as a durable Open that preallocates its log may: the check's
// span begins when the callers are released, not at Open, which would let
// this one pass. (Its margin leaves room for callers that sit idle for part
// of the cell on a loaded machine.)
func TestCheckCatchesFastRefill(t *testing.T) {
	cfg := hbCfg(t, 1000)
	sc := hbScenario(t, buildScenarios(cfg), "keys")
	r := newRunner(cfg.wl, 2, cfg.batch)
	honest := func() impl { return &hbFake{rateMul: 1, b: map[mapKey]*rate.Limiter{}} }
	over := func() impl { return &hbFake{rateMul: 1.3, b: map[mapKey]*rate.Limiter{}} }
	hbRunOn(t, r, cfg, sc, nil, 2, 400*time.Millisecond, 0, honest) // warm the runner's grant logs
	if h := hbRunOn(t, r, cfg, sc, nil, 2, 400*time.Millisecond, 80*time.Millisecond, honest); !h.Check.OK {
		t.Fatalf("an honest implementation failed the check (max fraction %.3f)", h.Check.MaxFraction)
	}
	if slow := hbRunOn(t, r, cfg, sc, nil, 2, 400*time.Millisecond, 160*time.Millisecond, over); slow.Check.OK {
		t.Errorf("30%% over-granting with a 160 ms Open passed the check (max fraction %.3f)", slow.Check.MaxFraction)
	}
}

// x/time/rate is configured with the same rate and burst as the token
// bucket and starts full: 200 immediate grants, then about 2000/s.
func TestBaselinesMatchTheBucket(t *testing.T) {
	start := time.Now()
	// what the 2000/s refill may add while the loops run (under -race too)
	slack := func() int { return int(2000*time.Since(start).Seconds()) + 1 }
	cfg := hbCfg(t, 10)
	sc := hbScenario(t, buildScenarios(cfg), "keys")
	l := newMapLimiter(64)
	n := 0
	for range 1000 {
		if ok, _ := l.limit(sc.perKey, "k", false); ok {
			n++
		}
	}
	if n < 200 || n > 200+slack() {
		t.Errorf("immediate grants %d, want 200", n)
	}
	// reserve: capacity 200 then 200 tokens of debt
	rs := hbScenario(t, buildScenarios(cfg), "reserve")
	n = 0
	for range 1000 {
		if ok, _ := l.limit(rs.perKey, "r", true); ok {
			n++
		}
	}
	if n < 400 || n > 400+slack() {
		t.Errorf("immediate reservations %d, want 400 (capacity + MaxReserved)", n)
	}
	// naive: the same
	nv, err := openNaive(filepath.Join(t.TempDir(), "n.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer nv.close()
	slowDef := &limitDef{name: "slow", rate: 1, capacity: 20, maxReserved: 20}
	n = 0
	began := time.Now()
	for range 60 {
		if ok, _ := nv.limit(slowDef, "r", true); ok {
			n++
		}
	}
	// 60 fsynced transactions can take over a second on a slow disk, and
	// the bucket refills 1/s meanwhile.
	if n < 40 || n > 41+int(time.Since(began).Seconds()) {
		t.Errorf("naive immediate reservations %d, want ~40 (capacity + MaxReserved)", n)
	}
}

// Our memory mode allocates nothing per call on warm keys in any scenario,
// harness work included (the cells themselves start empty, so key creation
// is in their window).
func TestOursMemoryWarmCallsDoNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	cfg := hbCfg(t, 1000)
	for _, sc := range buildScenarios(cfg) {
		im, err := openOurs(ratelimit.Options{}, sc.defs())
		if err != nil {
			t.Fatal(err)
		}
		pool := &grantPool{}
		pool.reserve(1 << 22)
		w := &worker{id: 0, wl: cfg.wl, pool: pool}
		batch := 0
		if sc.batch {
			batch = cfg.batch
		}
		w.reset(batch)
		w.reserveChunks(1 << 22 / grantChunk)
		v := &variant{global: sc.global}
		if len(sc.variants) > 0 {
			v = &sc.variants[0]
		}
		for range 200_000 { // create the keys the next calls use
			sc.call(im, w, v)
		}
		w.pos = w.wl.startPos(0)
		if a := testing.AllocsPerRun(20_000, func() { sc.call(im, w, v) }); a != 0 {
			t.Errorf("%s: %.4f allocations per call on warm keys, want 0", sc.name, a)
		}
		im.close()
	}
}

// A worker's grant log spans chunks of the pool, every grant counted
// once; reset lets go of the last cell's chunks, so a pool that a later
// cell replaces is not kept alive through them.
func TestGrantLogChunks(t *testing.T) {
	cfg := hbCfg(t, 10)
	pool := &grantPool{}
	pool.reserve(3 * grantChunk)
	w := &worker{id: 0, wl: cfg.wl, pool: pool}
	w.reset(0)
	w.reserveChunks(8)
	const n = 5*grantChunk + 7 // past the pool: the last chunks are new memory
	for i := range n {
		w.logGrant(uint32(i))
	}
	got := 0
	for _, log := range w.grantLogs() {
		for _, i := range log {
			if int(i) != got {
				t.Fatalf("grant %d logged as %d", got, i)
			}
			got++
		}
	}
	if got != n {
		t.Fatalf("%d grants in the log, want %d", got, n)
	}
	w.reset(0)
	for i, c := range w.filled[:cap(w.filled)] {
		if c != nil {
			t.Fatalf("after reset, filled slot %d still holds a chunk", i)
		}
	}
}
